// Publishes this edge's per-key usage to etcd, so that keyauthd can sum
// every edge's: every interval it reads the usage env the nginx workers
// write (read-only) and puts the totals that changed since the last round
// at "<prefix>/usage/<account><key>/<edge id>" (usage_keyspace.h), in
// transactions of at most 128 puts. The values are cumulative totals, so a
// put repeated or lost is made good by the next round; a failed round is
// counted, logged and retried at the next interval.
//
// It runs on a thread of its own with its own etcd client: a slow or
// unreachable etcd delays usage, never the mirror.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "etcd_client.h"
#include "syncd_metrics.h"
#include "usage_record.h"

namespace keyauth::syncd {

struct UsagePublisherOptions {
    etcd::ClientOptions etcd;
    std::string prefix;
    std::string usage_db;  // the edge's usage env
    std::chrono::milliseconds interval{15000};
};

// The edge id in the usage env at `usage_db` (what this edge's usage and
// quota use are published under); false while there is none yet, or with
// `error` set when the env cannot be read.
bool read_usage_edge_id(const std::string &usage_db, unsigned char edge_id[KA_USAGE_EDGE_ID_LEN],
                        std::string &error);

class UsagePublisher {
public:
    // Null with a reason when the etcd options are unusable.
    static std::unique_ptr<UsagePublisher> make(UsagePublisherOptions options, Metrics &metrics,
                                                std::string &error);

    // One round; false (logged and counted) if some totals were not
    // published. No usage env yet is not a failure: nothing to publish.
    bool publish_once();
    // Rounds every interval until stop() (which cancels a call under way).
    void run();
    void stop();

private:
    UsagePublisher(UsagePublisherOptions options, Metrics &metrics,
                   std::unique_ptr<etcd::Client> client);

    UsagePublisherOptions options_;
    Metrics &metrics_;
    std::unique_ptr<etcd::Client> client_;
    // What etcd holds of this edge, by LMDB key (account id ++ key id).
    std::map<std::string, UsageTotals> published_;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stop_ = false;
};

}  // namespace keyauth::syncd
