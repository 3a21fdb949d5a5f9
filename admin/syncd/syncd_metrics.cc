#include "syncd_metrics.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>

#include "prometheus_text.h"

namespace keyauth::syncd {
namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Metrics::Clock::now().time_since_epoch())
        .count();
}

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return buf;
}

}  // namespace

Metrics::Metrics(std::chrono::milliseconds max_lag) : max_lag_(max_lag), last_current_ns_(now_ns()) {}

void Metrics::set_applied(int64_t revision) {
    applied_.store(revision, std::memory_order_release);
    complete_.store(true, std::memory_order_release);
}

void Metrics::current() { last_current_ns_.store(now_ns(), std::memory_order_relaxed); }

void Metrics::set_blocked(bool blocked, const std::string &why) {
    {
        std::lock_guard<std::mutex> lock(why_mutex_);
        blocked_why_ = blocked ? why : "";
    }
    blocked_.store(blocked, std::memory_order_release);
}

void Metrics::set_built(bool from_snapshot, double seconds, const std::string &peer) {
    std::lock_guard<std::mutex> lock(built_mutex_);
    built_from_ = from_snapshot ? "snapshot" : "etcd";
    built_peer_ = from_snapshot ? peer : "";
    built_seconds_ = seconds;
}

void Metrics::add_snapshot_refusal(SnapshotRefusal why) {
    snapshot_refusals_[static_cast<int>(why)].fetch_add(1, std::memory_order_relaxed);
}

double Metrics::lag_seconds() const {
    const int64_t ns = now_ns() - last_current_ns_.load(std::memory_order_relaxed);
    return ns > 0 ? static_cast<double>(ns) / 1e9 : 0.0;
}

std::string Metrics::text() const {
    std::string out;
    metric(out, "keyauth_syncd_applied_revision", "gauge",
           "Highest etcd mod_revision applied to the edge's LMDB store (0 before the first snapshot).",
           std::to_string(applied_revision()));
    metric(out, "keyauth_syncd_lag_seconds", "gauge",
           "Seconds since this edge last knew it was current: every change etcd had made to the mirrored tables applied (since start if never).",
           seconds_text(lag_seconds()));
    metric(out, "keyauth_syncd_events_total", "counter",
           "Watch events applied (records skipped as not mirrored included).",
           std::to_string(events()));
    metric(out, "keyauth_syncd_rebuilds_total", "counter",
           "Complete rebuilds of the store from an etcd snapshot, swapped in.",
           std::to_string(rebuilds()));
    metric(out, "keyauth_syncd_etcd_up", "gauge", "1 while a watch on etcd is established, else 0.",
           etcd_up() ? "1" : "0");
    metric(out, "keyauth_syncd_apply_blocked", "gauge",
           "1 while a record cannot be applied (the edge serves its copy, behind etcd), else 0.",
           blocked() ? "1" : "0");
    metric(out, "keyauth_syncd_apply_errors_total", "counter",
           "Batches the store refused (a record layout this build cannot read, a full map); never skipped: the edge stays behind until the record is gone or readable.",
           std::to_string(apply_errors()));
    metric(out, "keyauth_syncd_usage_published_total", "counter",
           "Per-key usage totals of this edge written to etcd.", std::to_string(usage_published()));
    metric(out, "keyauth_syncd_usage_publish_errors_total", "counter",
           "Usage publications that failed (the usage env unreadable, etcd unreachable); retried next interval.",
           std::to_string(usage_publish_errors()));
    metric(out, "keyauth_syncd_usage_buckets_published_total", "counter",
           "Per-key hour and day usage buckets of this edge written to etcd.",
           std::to_string(usage_buckets_published()));
    metric(out, "keyauth_syncd_quota_published_total", "counter",
           "Quota use of this edge (a key's or an account's, in its period) written to etcd.",
           std::to_string(quota_published()));
    metric(out, "keyauth_syncd_quota_exchange_errors_total", "counter",
           "Quota exchange rounds that failed (etcd unreachable, the ledger full); retried next interval.",
           std::to_string(quota_exchange_errors()));
    metric(out, "keyauth_syncd_quota_exchanged_timestamp_seconds", "gauge",
           "When this edge last published its quota use and counted the other edges' (0: not yet).",
           std::to_string(quota_exchanged_ms() / 1000));
    if (!quota_redis_on_.load(std::memory_order_relaxed)) return out;
    metric(out, "keyauth_syncd_quota_redis_up", "gauge",
           "1 while the quota exchange's Redis connection (--quota-redis) is up, else 0 (etcd only meanwhile).",
           quota_redis_up() ? "1" : "0");
    metric(out, "keyauth_syncd_quota_redis_rounds_total", "counter",
           "Quota exchange rounds through Redis (publish this edge's use, read the other edges').",
           std::to_string(quota_redis_rounds()));
    metric(out, "keyauth_syncd_quota_redis_errors_total", "counter",
           "Quota exchange rounds through Redis that failed (Redis unreachable, slow, or answering out of shape); retried next interval.",
           std::to_string(quota_redis_errors()));
    metric(out, "keyauth_syncd_quota_redis_published_total", "counter",
           "Quota use records (a subject's cumulative use in its period) this edge added to the Redis stream.",
           std::to_string(quota_redis_published()));
    metric(out, "keyauth_syncd_quota_redis_skipped_total", "counter",
           "Malformed quota stream entries and records read from Redis, skipped.",
           std::to_string(quota_redis_skipped()));
    metric(out, "keyauth_syncd_quota_redis_dropped_total", "counter",
           "Quota use records read from Redis and not tracked: too many subjects, or edges of one subject.",
           std::to_string(quota_redis_dropped()));
    {
        std::lock_guard<std::mutex> lock(built_mutex_);
        metric(out, "keyauth_syncd_build_seconds", "gauge",
               "Seconds the last build of the store by this process took (0 before one): a peer's snapshot or etcd.",
               seconds_text(built_seconds_));
        metric(out, "keyauth_syncd_built_from_snapshot", "gauge",
               "1 if the last build of the store was a peer's snapshot (--bootstrap-from), else 0.",
               built_from_ == "snapshot" ? "1" : "0");
    }
    metric(out, "keyauth_syncd_bootstrap_refused_total", "counter",
           "Peer snapshots refused (unreachable, cut short, wrong checksum, cluster or schema, compacted): each a fallback.",
           std::to_string(bootstrap_refused_.load(std::memory_order_relaxed)));
    metric(out, "keyauth_syncd_snapshots_served_total", "counter",
           "Snapshots of this edge's store sent whole on GET /snapshot.", std::to_string(snapshots_served_.load()));
    metric(out, "keyauth_syncd_snapshots_failed_total", "counter",
           "Snapshots cut short: the client stalled past --snapshot-timeout or left, or the copy failed.",
           std::to_string(snapshots_failed_.load()));
    metric_family(out, "keyauth_syncd_snapshot_refusals_total", "counter",
                  "GET /snapshot refused: busy (a copy in progress, 429), not_ready (503), forbidden (403).");
    const char *reasons[] = {"busy", "not_ready", "forbidden"};
    for (int i = 0; i < 3; i++) {
        out += std::string("keyauth_syncd_snapshot_refusals_total{reason=\"") + reasons[i] + "\"} " +
               std::to_string(snapshot_refusals_[i].load()) + "\n";
    }
    return out;
}

const char *Metrics::unhealthy(std::string &message) const {
    if (!complete()) {
        message = "the store holds no complete snapshot of etcd yet";
        return "NOT_READY";
    }
    if (blocked()) {
        std::lock_guard<std::mutex> lock(why_mutex_);
        message = blocked_why_;
        return "CANNOT_APPLY";
    }
    const double lag = lag_seconds();
    if (lag * 1000.0 > static_cast<double>(max_lag_.count())) {
        message = "not known to be current for " + seconds_text(lag) + " s, over " +
                  seconds_text(max_lag_.count() / 1000.0) + " s";
        return "BEHIND";
    }
    return nullptr;
}

HttpResponse Metrics::handle(const HttpRequest &request) const noexcept {
    try {
        const bool known = request.path == "/metrics" || request.path == "/healthz";
        if (!known) return json_error(404, "NOT_FOUND", "no such path: /metrics and /healthz only");
        if (request.method != "GET") return metrics_method_not_allowed();
        if (request.path == "/metrics") return metrics_response(request, text());
        std::string why;
        const char *code = unhealthy(why);
        if (!complete()) return json_error(503, code, why);
        const double lag = std::round(lag_seconds() * 1000.0) / 1000.0;
        nlohmann::ordered_json body = {{"revision", applied_revision()}, {"lagSeconds", lag}};
        {
            std::lock_guard<std::mutex> lock(built_mutex_);
            body["builtFrom"] = built_from_.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(built_from_);
            body["buildSeconds"] = built_from_.empty() ? nlohmann::ordered_json()
                                                       : nlohmann::ordered_json(std::round(built_seconds_ * 1000) / 1000);
            if (!built_peer_.empty()) body["bootstrapPeer"] = built_peer_;
        }
        if (code) {
            body["error"] = {{"code", code}, {"message", why}};
            return json_response(503, body.dump());
        }
        return json_response(200, body.dump());
    } catch (...) {  // std::bad_alloc: an answer the server can still send
        HttpResponse r;
        r.status = 500;
        return r;
    }
}

}  // namespace keyauth::syncd
