#include "etcd_leader.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

namespace keyauth::etcd {

using std::chrono::milliseconds;

std::string make_holder_identity() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "%s", "unknown");
    std::random_device random;
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", random(), random());
    return std::string(host) + ":" + std::to_string(getpid()) + ":" + suffix;
}

// ---- EtcdLeader ---------------------------------------------------------

std::unique_ptr<EtcdLeader> EtcdLeader::make(LeaderOptions options, std::string &error) {
    if (options.key.empty()) {
        error = "the leader key is empty";
        return nullptr;
    }
    if (options.identity.empty()) {
        error = "the leader identity is empty";
        return nullptr;
    }
    if (options.ttl.count() < 1) {
        error = "the leader lease TTL must be at least 1 s";
        return nullptr;
    }
    // in milliseconds: whole seconds / 5 would round 2 s down to no margin
    if (options.margin.count() <= 0) options.margin = milliseconds(options.ttl) / 5;
    if (options.margin >= options.ttl) {
        error = "the leader margin must be shorter than the TTL";
        return nullptr;
    }
    // an answer that comes after the lease could have expired is of no use
    options.client.request_timeout =
        std::min<milliseconds>(options.client.request_timeout, milliseconds(options.ttl) / 2);
    std::unique_ptr<Client> client = Client::make(options.client, error);
    if (client == nullptr) return nullptr;
    return std::unique_ptr<EtcdLeader>(new EtcdLeader(std::move(options), std::move(client)));
}

EtcdLeader::EtcdLeader(LeaderOptions options, std::unique_ptr<Client> client)
    : options_(std::move(options)), client_(std::move(client)) {}

EtcdLeader::~EtcdLeader() = default;

bool EtcdLeader::note(const Status &s) {
    std::lock_guard<std::mutex> lock(mutex_);
    status_ = s;
    return s.ok();
}

Status EtcdLeader::last_status() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
}

void EtcdLeader::set_holder(std::string holder) {
    std::lock_guard<std::mutex> lock(mutex_);
    holder_ = std::move(holder);
}

std::string EtcdLeader::holder() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return holder_;
}

bool EtcdLeader::still_leader() const { return remaining() > Clock::duration::zero(); }

EtcdLeader::Clock::duration EtcdLeader::remaining() const {
    const Clock::rep fence = fence_.load();
    if (fence == 0) return Clock::duration::zero();
    return std::max(Clock::duration::zero(), Clock::time_point(Clock::duration(fence)) - Clock::now());
}

bool EtcdLeader::key_is_ours(const KeyValue &kv) const {
    return kv.value == options_.identity && lease_id_ != 0 && kv.lease == lease_id_;
}

void EtcdLeader::lead(int64_t create_revision) {
    held_ = true;
    term_.store(create_revision);
    const Clock::time_point fence = renewed_at_ + lease_ttl_ - options_.margin;
    fence_.store(fence.time_since_epoch().count());
    set_holder(options_.identity);
}

void EtcdLeader::lose() {
    fence_.store(0);  // first: no delivery starts from here on
    held_ = false;
    term_.store(0);
}

bool EtcdLeader::ensure_lease() {
    if (lease_id_ != 0) {
        const Clock::time_point sent = Clock::now();
        LeaseKeepAliveResponse k;
        if (!note(client_->lease_keepalive(lease_id_, k))) return false;
        if (k.ttl_seconds > 0) {
            renewed_at_ = sent;
            lease_ttl_ = std::chrono::seconds(k.ttl_seconds);
            return true;
        }
        lease_id_ = 0;  // expired: a new one
    }
    const Clock::time_point sent = Clock::now();
    LeaseGrantResponse g;
    if (!note(client_->lease_grant({options_.ttl.count(), 0}, g))) return false;
    lease_id_ = g.id;
    renewed_at_ = sent;
    lease_ttl_ = std::chrono::seconds(g.ttl_seconds);
    return true;
}

bool EtcdLeader::try_acquire() {
    if (held_) return keep();
    RangeRequest read;
    read.key = options_.key;
    RangeResponse current;
    if (!note(client_->range(read, current))) return false;
    if (!current.kvs.empty()) {
        const KeyValue &kv = current.kvs.front();
        set_holder(kv.value);
        // ours already: a txn whose answer was lost, or a keep() that gave
        // up while etcd still had the lease; renewed before it is trusted
        if (!key_is_ours(kv) || !ensure_lease() || !key_is_ours(kv)) return false;
        lead(kv.create_revision);
        return true;
    }
    if (!ensure_lease()) return false;
    TxnRequest txn;
    txn.compare.push_back(Compare::absent(options_.key));
    txn.success.emplace_back(PutRequest{options_.key, options_.identity, lease_id_});
    txn.failure.emplace_back(read);
    TxnResponse out;
    Status s = client_->txn(txn, out);
    if (s.code == Errc::kLeaseNotFound) lease_id_ = 0;  // expired since its renewal
    if (!note(s)) return false;
    if (out.succeeded) {
        lead(out.header.revision);  // the put's revision: the key's create_revision
        return true;
    }
    // another contender was first
    const auto *range = out.responses.empty() ? nullptr : std::get_if<RangeResponse>(&out.responses.front());
    set_holder(range != nullptr && !range->kvs.empty() ? range->kvs.front().value : std::string());
    return false;
}

bool EtcdLeader::keep() {
    if (!held_) return false;
    const Clock::time_point sent = Clock::now();
    LeaseKeepAliveResponse k;
    if (!note(client_->lease_keepalive(lease_id_, k))) {
        if (!still_leader()) lose();  // unconfirmed past the fence: campaign again
        return still_leader();
    }
    if (k.ttl_seconds <= 0) {  // expired or revoked: the key went with it
        lease_id_ = 0;
        lose();
        set_holder({});
        return false;
    }
    RangeRequest read;
    read.key = options_.key;
    RangeResponse current;
    if (!note(client_->range(read, current))) {
        if (!still_leader()) lose();
        return still_leader();
    }
    if (current.kvs.empty() || !key_is_ours(current.kvs.front())) {  // deleted by hand, maybe retaken
        lose();
        set_holder(current.kvs.empty() ? std::string() : current.kvs.front().value);
        return false;
    }
    renewed_at_ = sent;
    lease_ttl_ = std::chrono::seconds(k.ttl_seconds);
    lead(current.kvs.front().create_revision);
    return true;
}

void EtcdLeader::resign() {
    const bool was_holder = held_;
    lose();
    if (lease_id_ == 0) return;
    LeaseRevokeResponse out;
    Status s = client_->lease_revoke(lease_id_, out);
    lease_id_ = 0;  // revoked, or left to expire
    if (s.code != Errc::kLeaseNotFound) note(s);
    if (was_holder && (s.ok() || s.code == Errc::kLeaseNotFound)) set_holder({});
}

// ---- LeaderLoop ---------------------------------------------------------

LeaderLoop::LeaderLoop(std::unique_ptr<EtcdLeader> leader, OnChange on_change)
    : leader_(std::move(leader)), on_change_(std::move(on_change)) {
    thread_ = std::thread([this] { run(); });
}

LeaderLoop::~LeaderLoop() { stop(true); }

void LeaderLoop::stop(bool resign) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!stopping_) {
            stopping_ = true;
            resign_ = resign;
            if (!resign) leader_->cancel();
        }
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void LeaderLoop::run() {
    const milliseconds keep_every = milliseconds(leader_->ttl()) / 3;  // not whole seconds / 3
    const milliseconds campaign_every = std::min<milliseconds>(keep_every, std::chrono::seconds(1));
    auto report = [this](bool now) {
        if (leading_.exchange(now) != now && on_change_) on_change_(now, leader_->holder());
    };
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
        lock.unlock();
        const bool now = leader_->try_acquire();
        rounds_++;
        report(now);
        lock.lock();
        wake_.wait_for(lock, now ? keep_every : campaign_every, [this] { return stopping_; });
    }
    const bool resign = resign_;
    lock.unlock();
    if (resign) leader_->resign();
    report(false);
}

}  // namespace keyauth::etcd
