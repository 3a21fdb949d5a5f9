#include "webhook_metrics.h"

#include "prometheus_text.h"

namespace keyauth {

std::string render_webhook_metrics(const WebhookSenderCounts *counts, bool sending, Store &store) {
    std::string out;
    metric(out, "keyauthd_webhook_sender", "gauge",
           "1 while this keyauthd is the one that sends webhooks (on many edges: holds the etcd lease).",
           sending ? "1" : "0");
    if (!counts) return out;
    metric_family(out, "keyauthd_webhook_attempts_total", "counter",
                  "Webhook delivery attempts settled here since start, by outcome: delivered (2xx), failed "
                  "(retried or dead), dead (no attempt left, or the endpoint disabled), disabled (410 Gone).");
    const std::pair<const char *, uint64_t> outcomes[] = {{"delivered", counts->delivered.load()},
                                                          {"failed", counts->failed.load()},
                                                          {"dead", counts->dead.load()},
                                                          {"disabled", counts->disabled.load()}};
    for (const auto &[name, n] : outcomes) {
        out += std::string("keyauthd_webhook_attempts_total{outcome=\"") + name + "\"} " + std::to_string(n) + "\n";
    }
    metric(out, "keyauthd_webhook_events_emitted_total", "counter",
           "quota.threshold and key.expiring events noticed and written to the outbox here since start.",
           std::to_string(counts->emitted.load()));
    metric(out, "keyauthd_webhook_scans_total", "counter",
           "Looks over every account and key for thresholds and expiry, since start.",
           std::to_string(counts->scans.load()));
    if (!sending) return out;
    const WebhookQueueGauges q = store.webhook_queue_gauges();
    metric(out, "keyauthd_webhook_pending", "gauge", "Deliveries waiting for an attempt (a first one or a retry).",
           std::to_string(q.pending));
    metric(out, "keyauthd_webhook_outbox", "gauge", "Events written but not yet fanned out to their endpoints.",
           std::to_string(q.outbox));
    const double age = q.oldest_pending_ms ? std::max<int64_t>(0, store.now() - *q.oldest_pending_ms) / 1000.0 : 0;
    metric(out, "keyauthd_webhook_oldest_pending_seconds", "gauge",
           "Age of the oldest event not yet delivered (pending or in the outbox); 0 when none.",
           std::to_string(age));
    return out;
}

}  // namespace keyauth
