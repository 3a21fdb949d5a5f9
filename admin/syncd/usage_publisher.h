// Publishes this edge's per-key usage to etcd, so that keyauthd can sum
// every edge's: every interval it reads the usage env the nginx workers
// write (read-only) and puts the totals that changed since the last round
// at "<prefix>/usage/<account><key>/<edge id>" (usage_keyspace.h), in
// transactions of at most 128 puts. The values are cumulative totals, so a
// put repeated or lost is made good by the next round; a failed round is
// counted, logged and retried at the next interval.
//
// Usage over time (issue 29): each round also puts this edge's hour and
// day buckets (the usage env's `hours` and `days` tables) that changed
// since they were last put, at "<prefix>/usage_hours|usage_days/<period>/
// <account><key>/<edge id>" (usage_keyspace.h), in the same transactions.
// The tables are in time order and a bucket only grows while its period is
// current (and for a minute after), so a round reads them only from a
// watermark on: the previous hour and the previous day in steady state,
// older only while something older is still unpublished (a failed round,
// a syncd or etcd outage, a new edge). The bound, per interval: at most
// 2 x (keys active in the current or previous period) bucket puts, plus
// the totals that changed; a backlog is read buckets_per_round (65,536)
// buckets of a table a round (whole periods), oldest first.
//
// The watermark survives a restart: it is put at "<prefix>/usage_marks/
// <edge id>" whenever it moves (about once an hour) and read back at the
// first round, so a restarted syncd republishes only from its previous
// hour and day on (its cache of what etcd holds is empty), and after an
// outage publishes everything collected meanwhile, as far back as etcd
// keeps it. A missing mark (a new edge, or one from before the buckets)
// publishes everything the edge holds within etcd's keeping.
//
// Age out: at the first round and once an hour, one DeleteRange of the
// hours before the last 168 (7 days, as the edges keep them) and one of
// the days before the last `history_days` (--usage-history), and a put of
// `history_days` at "<prefix>/usage_history" (keyauthd clips its reads to
// it in between). Idempotent: every edge does it, any one is enough.
//
// It runs on a thread of its own with its own etcd client: a slow or
// unreachable etcd delays usage, never the mirror.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "syncd_metrics.h"
#include "usage_bucket.h"
#include "usage_record.h"

namespace keyauth::syncd {

struct UsagePublisherOptions {
    etcd::ClientOptions etcd;
    std::string prefix;
    std::string usage_db;  // the edge's usage env
    std::chrono::milliseconds interval{15000};
    // Day buckets older than this many days are deleted from etcd
    // (--usage-history); hours after kHourBucketsKept.
    uint32_t history_days = kDefaultDayBucketsKept;
    // Unix ms now; null: the system clock (tests set it).
    std::function<int64_t()> now_ms;
    // Buckets of one table read in a round beyond which a backlog stops at
    // the end of a period (and goes on next round).
    size_t buckets_per_round = 65536;
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

    // One round; false (logged and counted) if some totals or buckets were
    // not published, or the age-out failed. No usage env yet is not a
    // failure: nothing to publish.
    bool publish_once();
    // Rounds every interval until stop() (which cancels a call under way).
    void run();
    void stop();

private:
    UsagePublisher(UsagePublisherOptions options, Metrics &metrics,
                   std::unique_ptr<etcd::Client> client);

    // One table of buckets: what etcd holds of it from `from` on, by LMDB
    // bucket key, and the first period the next round reads.
    struct BucketTable {
        Granularity g;
        std::map<std::string, BucketCounts> published;
        uint32_t from = 0;
    };
    struct Put;
    int64_t now_ms() const;
    // publish_once without counting its failure.
    bool publish_round();
    // Ages out once per hour; false (logged) if etcd refused.
    bool age_out(uint32_t hour, uint32_t day);
    // Reads this edge's mark from etcd once per edge id.
    bool load_mark(const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);
    // Puts in transactions of kPutsPerTxn; false at the first that fails.
    bool put_all(std::vector<Put> &puts);

    UsagePublisherOptions options_;
    Metrics &metrics_;
    std::unique_ptr<etcd::Client> client_;
    // What etcd holds of this edge, by LMDB key (account id ++ key id).
    std::map<std::string, UsageTotals> published_;
    BucketTable hours_{Granularity::kHour, {}, 0};
    BucketTable days_{Granularity::kDay, {}, 0};
    // The edge whose state the above is; its mark as etcd holds it.
    bool edge_known_ = false;
    unsigned char edge_id_[KA_USAGE_EDGE_ID_LEN] = {};
    std::string mark_in_etcd_;
    bool aged_out_ = false;
    uint32_t aged_out_hour_ = 0;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stop_ = false;
};

}  // namespace keyauth::syncd
