#include "usage_publisher.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "etcd_codec.h"
#include "ids.h"
#include "syncd_log.h"
#include "usage_keyspace.h"

namespace keyauth::syncd {
namespace {

// etcd refuses more operations per txn (--max-txn-ops).
constexpr size_t kPutsPerTxn = 128;

struct EdgeUsage {
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
    std::map<std::string, UsageTotals> totals;  // account id ++ key id
};

// LMDB must not have one environment open twice in a process (closing
// either drops the other's locks): the publisher's and the quota exchange's
// reads of the usage env take turns.
std::mutex usage_env_mu;

// Opens the usage env read-only, runs `fn` in a read transaction with the
// edge id (and the usage database), and closes it. MDB_NOTFOUND: no edge id
// yet (made by nginx, not written yet).
template <class Fn>
int with_usage_env(const std::string &path, unsigned char edge_id[KA_USAGE_EDGE_ID_LEN], Fn &&fn) {
    std::lock_guard<std::mutex> lock(usage_env_mu);
    MDB_env *env = nullptr;
    int rc = mdb_env_create(&env);
    if (rc == 0) {
        mdb_env_set_maxdbs(env, KA_USAGE_DB_COUNT);
        rc = mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOTLS, 0);
    }
    MDB_txn *txn = nullptr;
    MDB_dbi meta = 0, usage = 0;
    if (rc == 0) rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
    if (rc == 0) rc = mdb_dbi_open(txn, KA_USAGE_DB_META, 0, &meta);
    if (rc == 0) rc = mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &usage);
    MDB_val k{sizeof(KA_USAGE_META_EDGE_ID) - 1, const_cast<char *>(KA_USAGE_META_EDGE_ID)}, v{};
    if (rc == 0) rc = mdb_get(txn, meta, &k, &v);
    if (rc == 0 && v.mv_size != KA_USAGE_EDGE_ID_LEN) rc = MDB_CORRUPTED;
    if (rc == 0) std::memcpy(edge_id, v.mv_data, KA_USAGE_EDGE_ID_LEN);
    if (rc == 0) rc = fn(txn, usage);
    if (txn != nullptr) mdb_txn_abort(txn);
    if (env != nullptr) mdb_env_close(env);
    return rc;
}

// The usage env as it is now; false with a reason if it cannot be read.
// An env without an edge id yet reads as empty.
bool read_edge_usage(const std::string &path, EdgeUsage &out, std::string &error) {
    const int rc = with_usage_env(path, out.edge_id, [&out](MDB_txn *txn, MDB_dbi usage) {
        MDB_cursor *cur = nullptr;
        int rc = mdb_cursor_open(txn, usage, &cur);
        if (rc != 0) return rc;
        MDB_val k{}, v{};
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            UsageTotals t;
            if (k.mv_size != KA_USAGE_KEY_LEN ||
                !decode_usage_record({static_cast<const char *>(v.mv_data), v.mv_size}, t)) {
                continue;  // a layout this build does not know: not ours to publish
            }
            out.totals[std::string(static_cast<const char *>(k.mv_data), k.mv_size)] = t;
        }
        mdb_cursor_close(cur);
        return rc == MDB_NOTFOUND ? 0 : rc;
    });
    if (rc == MDB_NOTFOUND) {  // made by nginx, not written yet
        out.totals.clear();
        return true;
    }
    if (rc != 0) error = "usage env \"" + path + "\": " + mdb_strerror(rc);
    return rc == 0;
}

}  // namespace

bool read_usage_edge_id(const std::string &usage_db, unsigned char edge_id[KA_USAGE_EDGE_ID_LEN],
                        std::string &error) {
    struct stat st;
    if (::stat((usage_db + "/data.mdb").c_str(), &st) != 0) return false;  // no usage env yet
    const int rc = with_usage_env(usage_db, edge_id, [](MDB_txn *, MDB_dbi) { return 0; });
    if (rc != 0 && rc != MDB_NOTFOUND) error = "usage env \"" + usage_db + "\": " + mdb_strerror(rc);
    return rc == 0;
}

std::unique_ptr<UsagePublisher> UsagePublisher::make(UsagePublisherOptions options, Metrics &metrics,
                                                     std::string &error) {
    auto client = etcd::Client::make(options.etcd, error);
    if (!client) return nullptr;
    return std::unique_ptr<UsagePublisher>(new UsagePublisher(std::move(options), metrics, std::move(client)));
}

UsagePublisher::UsagePublisher(UsagePublisherOptions options, Metrics &metrics,
                               std::unique_ptr<etcd::Client> client)
    : options_(std::move(options)), metrics_(metrics), client_(std::move(client)) {}

bool UsagePublisher::publish_once() {
    struct stat st;
    if (::stat((options_.usage_db + "/data.mdb").c_str(), &st) != 0) return true;  // no usage yet
    EdgeUsage now;
    std::string error;
    if (!read_edge_usage(options_.usage_db, now, error)) {
        metrics_.add_usage_publish_error();
        log_event("usage publish failed", {{"error", error}});
        return false;
    }
    std::vector<std::pair<const std::string *, const UsageTotals *>> changed;
    for (const auto &[key, totals] : now.totals) {
        auto it = published_.find(key);
        if (it == published_.end() || it->second != totals) changed.emplace_back(&key, &totals);
    }
    for (size_t i = 0; i < changed.size(); i += kPutsPerTxn) {
        etcd::TxnRequest txn;
        const size_t end = std::min(changed.size(), i + kPutsPerTxn);
        for (size_t j = i; j < end; j++) {
            Id account, key;
            std::memcpy(account.data(), changed[j].first->data(), KA_ID_LEN);
            std::memcpy(key.data(), changed[j].first->data() + KA_ID_LEN, KA_ID_LEN);
            unsigned char rec[KA_USAGE_RECORD_SIZE];
            encode_usage_record(*changed[j].second, rec);
            txn.success.emplace_back(etcd::PutRequest{
                etcd_usage_key(options_.prefix, account, key, now.edge_id),
                std::string(reinterpret_cast<char *>(rec), sizeof(rec))});
        }
        etcd::TxnResponse answer;
        etcd::Status s = client_->txn(txn, answer);
        if (!s.ok()) {
            // what was not published stays changed: the next round sends it
            metrics_.add_usage_publish_error();
            log_event("usage publish failed",
                      {{"error", std::string(etcd::errc_name(s.code)) + ": " + s.message},
                       {"unpublished", changed.size() - i}});
            return false;
        }
        for (size_t j = i; j < end; j++) published_[*changed[j].first] = *changed[j].second;
        metrics_.add_usage_published(end - i);
    }
    return true;
}

void UsagePublisher::run() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait_for(lock, options_.interval, [this] { return stop_; });
            if (stop_) break;
        }
        try {
            publish_once();
        } catch (const std::exception &e) {  // bad_alloc: the next round may do better
            metrics_.add_usage_publish_error();
            log_event("usage publish failed", {{"error", e.what()}});
        }
    }
}

void UsagePublisher::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    client_->cancel();
}

}  // namespace keyauth::syncd
