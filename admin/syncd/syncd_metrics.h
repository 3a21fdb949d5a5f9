// keyauth-syncd's counters and gauges, and what it serves on --metrics:
// GET /metrics (Prometheus text) and GET /healthz. The sync loop writes
// them, HTTP workers read them: every field is an atomic.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "http_exchange.h"

namespace keyauth::syncd {

class Metrics {
public:
    using Clock = std::chrono::steady_clock;

    // The lag clock starts now: a store opened from disk is not known to be
    // current until etcd says so, so until then the lag is the time since
    // start. `max_lag`: /healthz answers 503 past it.
    explicit Metrics(std::chrono::milliseconds max_lag = std::chrono::seconds(10));

    // The store holds a complete snapshot up to `revision` (a mark exists
    // and the cluster id is known): /healthz answers 200 from now on.
    void set_applied(int64_t revision);
    // The edge knows it is current: every change etcd had made to the
    // watched range is applied (a rebuild, a live batch whose header
    // revision it reached, a progress notification of a synced watch).
    // Lag is the time since the last such moment, never "since something
    // was heard": a batch that cannot be applied keeps it growing.
    void current();
    // A batch cannot be applied (`why` names the record and the error):
    // /healthz answers 503 until it can be (blocked(false)).
    void set_blocked(bool blocked, const std::string &why = "");
    void add_events(uint64_t count) { events_.fetch_add(count, std::memory_order_relaxed); }
    void add_rebuild() { rebuilds_.fetch_add(1, std::memory_order_relaxed); }
    void add_apply_error() { apply_errors_.fetch_add(1, std::memory_order_relaxed); }
    void set_etcd_up(bool up) { etcd_up_.store(up, std::memory_order_relaxed); }
    void add_usage_published(uint64_t n) { usage_published_.fetch_add(n, std::memory_order_relaxed); }
    void add_usage_publish_error() { usage_publish_errors_.fetch_add(1, std::memory_order_relaxed); }
    void add_usage_buckets_published(uint64_t n) { usage_buckets_published_.fetch_add(n, std::memory_order_relaxed); }
    void add_quota_published(uint64_t n) { quota_published_.fetch_add(n, std::memory_order_relaxed); }
    void add_quota_exchange_error() { quota_exchange_errors_.fetch_add(1, std::memory_order_relaxed); }
    void set_quota_exchanged(int64_t unix_ms) { quota_exchanged_ms_.store(unix_ms, std::memory_order_relaxed); }
    // The quota exchange's Redis transport (--quota-redis, quota_redis.h).
    void enable_quota_redis() { quota_redis_on_.store(true, std::memory_order_relaxed); }
    void set_quota_redis_up(bool up) { quota_redis_up_.store(up, std::memory_order_relaxed); }
    void add_quota_redis_round() { quota_redis_rounds_.fetch_add(1, std::memory_order_relaxed); }
    void add_quota_redis_error() { quota_redis_errors_.fetch_add(1, std::memory_order_relaxed); }
    void add_quota_redis_published(uint64_t n) { quota_redis_published_.fetch_add(n, std::memory_order_relaxed); }
    void add_quota_redis_skipped(uint64_t n) { quota_redis_skipped_.fetch_add(n, std::memory_order_relaxed); }
    void add_quota_redis_dropped(uint64_t n) { quota_redis_dropped_.fetch_add(n, std::memory_order_relaxed); }
    // How this process last built the store: from a peer's snapshot (`peer`
    // its URL) or from etcd, and how long it took (/healthz says so).
    void set_built(bool from_snapshot, double seconds, const std::string &peer = "");
    void add_bootstrap_refused() { bootstrap_refused_.fetch_add(1, std::memory_order_relaxed); }
    // GET /snapshot (snapshot_service.h).
    enum class SnapshotRefusal { kBusy, kNotReady, kForbidden };
    void add_snapshot_refusal(SnapshotRefusal why);
    void add_snapshot_served() { snapshots_served_.fetch_add(1, std::memory_order_relaxed); }
    void add_snapshot_failed() { snapshots_failed_.fetch_add(1, std::memory_order_relaxed); }

    bool complete() const { return complete_.load(std::memory_order_acquire); }
    int64_t applied_revision() const { return applied_.load(std::memory_order_acquire); }
    double lag_seconds() const;
    uint64_t events() const { return events_.load(std::memory_order_relaxed); }
    uint64_t rebuilds() const { return rebuilds_.load(std::memory_order_relaxed); }
    uint64_t apply_errors() const { return apply_errors_.load(std::memory_order_relaxed); }
    bool etcd_up() const { return etcd_up_.load(std::memory_order_relaxed); }
    bool blocked() const { return blocked_.load(std::memory_order_acquire); }
    std::chrono::milliseconds max_lag() const { return max_lag_; }
    uint64_t usage_published() const { return usage_published_.load(std::memory_order_relaxed); }
    uint64_t usage_publish_errors() const { return usage_publish_errors_.load(std::memory_order_relaxed); }
    uint64_t usage_buckets_published() const { return usage_buckets_published_.load(std::memory_order_relaxed); }
    uint64_t quota_published() const { return quota_published_.load(std::memory_order_relaxed); }
    uint64_t quota_exchange_errors() const { return quota_exchange_errors_.load(std::memory_order_relaxed); }
    bool quota_redis_up() const { return quota_redis_up_.load(std::memory_order_relaxed); }
    uint64_t quota_redis_rounds() const { return quota_redis_rounds_.load(std::memory_order_relaxed); }
    uint64_t quota_redis_errors() const { return quota_redis_errors_.load(std::memory_order_relaxed); }
    uint64_t quota_redis_published() const { return quota_redis_published_.load(std::memory_order_relaxed); }
    uint64_t quota_redis_skipped() const { return quota_redis_skipped_.load(std::memory_order_relaxed); }
    uint64_t quota_redis_dropped() const { return quota_redis_dropped_.load(std::memory_order_relaxed); }
    // Unix ms of the last complete quota exchange round (0: none yet).
    int64_t quota_exchanged_ms() const { return quota_exchanged_ms_.load(std::memory_order_relaxed); }

    // Why /healthz answers 503 ("NOT_READY", "CANNOT_APPLY", "BEHIND"), or
    // null when it answers 200; `message` says more.
    const char *unhealthy(std::string &message) const;

    // Prometheus text exposition format 0.0.4, with # HELP and # TYPE.
    std::string text() const;

    // GET /metrics, GET /healthz; 404 for another path, 405 for another
    // method. Never throws (an HttpServer handler).
    HttpResponse handle(const HttpRequest &request) const noexcept;

private:
    std::atomic<int64_t> applied_{0};
    std::atomic<bool> complete_{false};
    std::chrono::milliseconds max_lag_;
    std::atomic<int64_t> last_current_ns_;  // Clock's time since its epoch
    std::atomic<bool> blocked_{false};
    mutable std::mutex why_mutex_;
    std::string blocked_why_;  // under why_mutex_
    std::atomic<uint64_t> events_{0};
    std::atomic<uint64_t> rebuilds_{0};
    std::atomic<uint64_t> apply_errors_{0};
    std::atomic<bool> etcd_up_{false};
    std::atomic<uint64_t> usage_published_{0};
    std::atomic<uint64_t> usage_publish_errors_{0};
    std::atomic<uint64_t> usage_buckets_published_{0};
    std::atomic<uint64_t> quota_published_{0};
    std::atomic<uint64_t> quota_exchange_errors_{0};
    std::atomic<int64_t> quota_exchanged_ms_{0};
    std::atomic<bool> quota_redis_on_{false};
    std::atomic<bool> quota_redis_up_{false};
    std::atomic<uint64_t> quota_redis_rounds_{0};
    std::atomic<uint64_t> quota_redis_errors_{0};
    std::atomic<uint64_t> quota_redis_published_{0};
    std::atomic<uint64_t> quota_redis_skipped_{0};
    std::atomic<uint64_t> quota_redis_dropped_{0};
    mutable std::mutex built_mutex_;
    std::string built_from_;  // under built_mutex_: "snapshot", "etcd", or empty
    std::string built_peer_;
    double built_seconds_ = 0;
    std::atomic<uint64_t> bootstrap_refused_{0};
    std::atomic<uint64_t> snapshots_served_{0};
    std::atomic<uint64_t> snapshots_failed_{0};
    std::atomic<uint64_t> snapshot_refusals_[3] = {};
};

}  // namespace keyauth::syncd
