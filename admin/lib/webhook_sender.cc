#include "webhook_sender.h"

#include <random>

#include "access_log.h"
#include "store_error.h"
#include "webhook_events.h"
#include "webhook_schedule.h"
#include "webhook_watch.h"

namespace keyauth {
namespace {

constexpr size_t kFanOutBatch = 64;
constexpr size_t kDueBatch = 256;
constexpr int64_t kKeptMs = 30LL * 86400 * 1000;

uint32_t jitter() {
    static thread_local std::mt19937 rng{std::random_device{}()};
    return static_cast<uint32_t>(rng());
}

bool wants_any(const std::vector<Webhook> &hooks, const char *type) {
    for (const Webhook &w : hooks) {
        if (!w.disabled_ms && std::find(w.events.begin(), w.events.end(), type) != w.events.end()) return true;
    }
    return false;
}

}  // namespace

WebhookSender::WebhookSender(Store &store, const WebhookKey &key, WebhookSenderOptions options,
                             QuotaUsageSource *usage, std::function<bool()> may_send)
    : store_(store), key_(key), options_(std::move(options)), usage_(usage), may_send_(std::move(may_send)) {}

WebhookSender::~WebhookSender() { stop(); }

void WebhookSender::start() {
    loop_ = std::thread([this] { run(); });
    for (size_t i = 0; i < std::max<size_t>(options_.workers, 1); i++) workers_.emplace_back([this] { work(); });
}

void WebhookSender::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (loop_.joinable()) loop_.join();
    for (auto &t : workers_) {
        if (t.joinable()) t.join();
    }
    workers_.clear();
}

void WebhookSender::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
        lock.unlock();
        try {
            if (may_send_()) step(store_.now());
        } catch (const std::exception &e) {
            // etcd away, the store busy: the next tick tries again
            emit({{"event", "webhook_sender_error"}, {"error", e.what()}});
        }
        lock.lock();
        wake_.wait_for(lock, options_.tick, [this] { return stopping_ || poke_; });
        poke_ = false;
    }
}

void WebhookSender::step(int64_t now_ms) {
    while (size_t n = store_.fan_out_webhook_events(kFanOutBatch)) {
        counts_.fanned_out += n;
        if (!may_send_()) return;
    }
    const std::vector<Webhook> hooks = store_.list_webhooks();
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_watch_) {
        next_watch_ = now + options_.watch_every;
        const WatchPass pass = watch_pass(store_, usage_, now_ms, wants_any(hooks, kQuotaThreshold),
                                          wants_any(hooks, kKeyExpiring));
        counts_.emitted += pass.emitted;
        if (pass.accounts || pass.keys) counts_.scans++;
        if (pass.emitted) {
            while (size_t n = store_.fan_out_webhook_events(kFanOutBatch)) counts_.fanned_out += n;
        }
    }
    if (now >= next_prune_) {
        // delivered and dead deliveries are listed for 30 days
        next_prune_ = now + std::chrono::hours(1);
        while (store_.prune_deliveries(now_ms - kKeptMs, 100) == 100) {
            if (!may_send_()) return;
        }
    }
    std::map<Id, const Webhook *> by_id;
    for (const Webhook &w : hooks) by_id[w.id] = &w;
    // An endpoint with an attempt running now is left to the step its end
    // pokes: read now, its due list may still hold the delivery that attempt
    // settles a moment later, which would go out twice. Only this thread
    // starts attempts, so the others' lists cannot go stale meanwhile.
    std::set<Id> busy;
    {
        std::lock_guard<std::mutex> lock(mu_);
        busy = in_flight_;
    }
    std::vector<Job> jobs;
    for (const Delivery &d : store_.due_deliveries(now_ms, kDueBatch)) {
        auto it = by_id.find(d.webhook);
        if (it == by_id.end()) {
            store_.drop_delivery(d);  // its endpoint was deleted
            continue;
        }
        if (it->second->disabled_ms) {
            // the receiver said 410 Gone: nothing more goes there
            DeliveryUpdate u;
            u.next = d;
            u.next.status = DeliveryStatus::kDead;
            u.next.last_error = "endpoint disabled";
            u.next.finished_ms = now_ms;
            if (store_.update_delivery(d, u)) counts_.dead++;
            continue;
        }
        if (!busy.count(d.webhook)) jobs.push_back(Job{d, it->second->url});
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (Job &j : jobs) {
            if (!in_flight_.insert(j.delivery.webhook).second) continue;  // one at a time per endpoint
            queue_.push_back(std::move(j));
        }
    }
    wake_.notify_all();
}

void WebhookSender::work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        Job job = std::move(queue_.front());
        queue_.erase(queue_.begin());
        lock.unlock();
        try {
            if (may_send_()) attempt(job);
        } catch (const std::exception &e) {
            emit({{"event", "webhook_sender_error"}, {"error", e.what()}});
        }
        lock.lock();
        in_flight_.erase(job.delivery.webhook);
        // the endpoint's next due delivery goes now, not a tick later: an
        // endpoint takes as many events a second as it answers
        poke_ = true;
        wake_.notify_all();
    }
}

void WebhookSender::attempt(const Job &job) {
    const Delivery &d = job.delivery;
    const std::string message_id = id_to_string(kEventIdPrefix, d.event);
    const int64_t sent_ms = store_.now();
    const int64_t timestamp = sent_ms / 1000;
    const WebhookSecret secret = webhook_secret(key_, d.webhook);
    const std::vector<std::pair<std::string, std::string>> headers = {
        {"content-type", "application/json"},
        {"webhook-id", message_id},
        {"webhook-timestamp", std::to_string(timestamp)},
        {"webhook-signature", webhook_signature(secret, message_id, timestamp, d.body)},
    };
    const WebhookHttpResult result = post_webhook(job.url, headers, d.body, options_.http);
    const DeliveryUpdate u = settle_webhook_attempt(d, result.status, result.error, store_.now(), jitter());
    const bool written = store_.update_delivery(d, u);
    const char *outcome = u.next.status == DeliveryStatus::kDelivered ? "delivered"
                          : u.disable_webhook                        ? "disabled"
                          : u.next.status == DeliveryStatus::kDead   ? "dead"
                                                                     : "retry";
    if (written) {
        if (u.next.status == DeliveryStatus::kDelivered) counts_.delivered++;
        else counts_.failed++;
        if (u.next.status == DeliveryStatus::kDead) counts_.dead++;
        if (u.disable_webhook) counts_.disabled++;
    }
    nlohmann::ordered_json line = {{"event", "webhook_attempt"},
                                   {"webhook", id_to_string(kWebhookIdPrefix, d.webhook)},
                                   {"eventId", message_id},
                                   {"type", d.type},
                                   {"attempt", u.next.attempts},
                                   {"status", result.status},
                                   {"outcome", outcome}};
    if (!result.error.empty()) line["error"] = result.error;
    if (!written) line["settled"] = "elsewhere";
    emit(line);
}

}  // namespace keyauth
