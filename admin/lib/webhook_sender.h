// keyauthd's webhook sender (DESIGN, *Events and webhooks*). One thread
// moves events from the outbox to their endpoints' pending deliveries and
// hands due deliveries to a few workers, at most one per endpoint at a
// time, so a slow or dead receiver holds one worker (10 s at most an
// attempt) and never the console API, the edge or another endpoint while
// a worker is free. Each attempt is signed afresh (Standard Webhooks) and
// settled in the store (webhook_schedule.h); until it is settled the
// delivery stays pending, so a sender killed mid-attempt sends it again when
// it is back: at least once, with the same webhook-id.
//
// `may_send` says whether this process is the one sender (always, on one
// host; the holder of the etcd lease on many): asked before every step and
// every attempt, so a sender that lost its lease stops at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "quota_usage.h"
#include "store.h"
#include "webhook_http.h"
#include "webhook_signing.h"

namespace keyauth {

struct WebhookSenderOptions {
    WebhookHttpOptions http;
    std::chrono::milliseconds tick{1000};        // how often the outbox and due list are read
    std::chrono::milliseconds watch_every{60000};  // thresholds and expiry (webhook_watch.h)
    size_t workers = 4;
};

// Counted since start, for /metrics.
struct WebhookSenderCounts {
    std::atomic<uint64_t> delivered{0}, failed{0}, dead{0}, disabled{0}, fanned_out{0}, emitted{0}, scans{0};
};

class WebhookSender {
public:
    WebhookSender(Store &store, const WebhookKey &key, WebhookSenderOptions options, QuotaUsageSource *usage,
                  std::function<bool()> may_send);
    ~WebhookSender();
    void start();
    void stop();  // waits for the attempts in flight (10 s at most)

    const WebhookSenderCounts &counts() const { return counts_; }

private:
    struct Job {
        Delivery delivery;
        std::string url;
    };
    void run();
    void work();
    void step(int64_t now_ms);
    void attempt(const Job &job);

    Store &store_;
    const WebhookKey key_;
    const WebhookSenderOptions options_;
    QuotaUsageSource *usage_;
    std::function<bool()> may_send_;
    WebhookSenderCounts counts_;

    std::mutex mu_;
    std::condition_variable wake_;
    std::vector<Job> queue_;
    std::set<Id> in_flight_;  // endpoints with an attempt queued or running
    bool stopping_ = false;
    bool poke_ = false;  // an attempt ended: its endpoint's next delivery may go now
    std::chrono::steady_clock::time_point next_watch_{}, next_prune_{};
    std::thread loop_;
    std::vector<std::thread> workers_;
};

}  // namespace keyauth
