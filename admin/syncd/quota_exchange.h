// The quota exchange between edges (many-edge mode, issue 28): every
// interval (1 s by default) keyauth-syncd
//   1. reads every edge's quota use from etcd (one paged range over
//      "<prefix>/quota/", quota_keyspace.h),
//   2. counts what the OTHER edges used of each subject in its current
//      period into this edge's quota ledger (QuotaLedger::set_others), so
//      that the nginx workers admit against the fleet's use; a subject the
//      other edges have not used gets no slot,
//   3. puts this edge's own use of each subject with use in its current
//      period (read from the ledger) where it differs from what etcd holds,
//      in transactions of at most 128 puts,
//   4. deletes (at most 128 a round) this edge's keys of periods that are
//      over, so the keyspace holds about one key per subject and edge.
// What etcd holds of this edge is read back each round, so a put lost or
// repeated, or a syncd restarted, is made good by the next round. The
// overshoot this allows across edges is docs/scale-out.md's "Quotas across
// edges".
//
// It runs on a thread of its own with its own etcd client: a slow or
// unreachable etcd delays the exchange, never the mirror or usage.
//
// With --quota-redis, a QuotaRedis (quota_redis.h) on another thread hears
// the other edges' use sooner, through a Redis stream, and hands its sums
// to set_redis_others(): this class alone sets the others' use in the
// ledger, per subject the greater of etcd's and Redis's sums.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "etcd_client.h"
#include "ids.h"
#include "keyauth_schema.h"
#include "quota_ledger.h"
#include "interval_loop.h"
#include "syncd_metrics.h"

namespace keyauth::syncd {

struct QuotaExchangeOptions {
    etcd::ClientOptions etcd;
    std::string prefix;
    std::string usage_db;  // the edge's usage dir: the ledger is its quota.ledger, the edge id its env's
    std::chrono::milliseconds interval{1000};
};

class QuotaExchange {
public:
    // Null with a reason when the etcd options are unusable.
    static std::unique_ptr<QuotaExchange> make(QuotaExchangeOptions options, Metrics &metrics,
                                               std::string &error);

    // One round at now_ms (Unix ms). False (counted, logged when it starts
    // failing) if etcd could not be read or written, or the ledger had no
    // room for a subject. No ledger yet (nginx makes it) is not a failure:
    // nothing to exchange. Without an edge id yet (nginx makes the usage
    // env at its first collection) it counts every edge's use as others'
    // and publishes nothing.
    bool exchange_once(int64_t now_ms);

    // The ledger (null while the workers have not made it) and this edge's
    // id (have_edge_id false while nginx has not made its usage env), for
    // the Redis transport; false with error if the usage env is unreadable.
    struct LedgerView {
        std::shared_ptr<QuotaLedger> ledger;
        bool have_edge_id = false;
        unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
    };
    bool attach(LedgerView &view, std::string &error);
    // By subject byte ++ id: a period tag and units.
    using Sums = std::map<std::string, std::pair<uint16_t, uint64_t>>;
    // What the other edges used, as heard through Redis: counted from now
    // on as max(etcd's sum, this) per subject. False when the ledger had no
    // room for a subject.
    bool set_redis_others(Sums sums, int64_t now_ms);
    // Rounds every interval, the first at once, until stop() (which cancels
    // a call under way).
    void run();
    void stop();

private:
    QuotaExchange(QuotaExchangeOptions options, Metrics &metrics, std::unique_ptr<etcd::Client> client);
    bool round(int64_t now_ms, std::string &error);
    bool failed(const std::string &error);
    bool apply_others(int64_t now_ms);

    QuotaExchangeOptions options_;
    Metrics &metrics_;
    std::unique_ptr<etcd::Client> client_;
    // Under others_mu_ (the etcd round's thread and the Redis one's):
    std::mutex others_mu_;
    std::shared_ptr<QuotaLedger> ledger_;
    std::pair<ino_t, dev_t> ledger_file_{};  // the file ledger_ maps
    bool have_edge_id_ = false;
    unsigned char edge_id_[KA_USAGE_EDGE_ID_LEN] = {};
    Sums etcd_others_, redis_others_;  // the other edges' sums, as each last said
    // What this edge last set as the others' use: the period tag and the
    // units (non-zero).
    Sums folded_;
    bool failing_ = false;
    IntervalLoop loop_;
};

}  // namespace keyauth::syncd
