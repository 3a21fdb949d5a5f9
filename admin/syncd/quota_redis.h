// keyauth-syncd's Redis transport for the quota exchange (--quota-redis,
// issue 28): the etcd exchange (quota_exchange.h) bounds the fleet's
// overshoot by what the other edges admit in about 2 × --quota-interval;
// through a Redis stream the other edges hear this edge's use within about
// 2 × --quota-redis-interval (200 ms) instead.
//
// Every interval, on a thread of its own:
//   1. publishes the subjects whose OWN cumulative use in their current
//      period changed since the last publish (every subject with use after
//      a start, a reconnection, and every half retention, so the stream
//      always holds each edge's current values): XADD <stream> MINID ~
//      <the last id it added - retention> * e <edge id, 24 hex> q <batch>
//      (by Redis's clock: a syncd whose clock is ahead trims nothing early;
//      quota_batch.h, at most 1,024 records an entry), then EXPIRE <stream>
//      <retention>;
//   2. reads the entries added since the last read (at start, everything
//      the stream retains, so a restarted syncd relearns the fleet's
//      values), XREAD COUNT 128, keeping per subject and other edge the
//      latest cumulative value of the subject's current period;
//   3. hands the sums over the other edges to QuotaExchange, which counts
//      max(etcd's, Redis's) per subject: both are lower bounds of the
//      fleet's use, so the max never over-counts.
// Cumulative values, never deltas: an entry read twice counts once.
//
// A Redis down, slow (connect and command timeouts) or answering out of
// shape fails the round: counted, logged once when the rounds start failing
// and once when they recover; the edge counts etcd's sums (and what Redis
// last told, still a lower bound) meanwhile. Every reply is bounded
// (elements, objects, bytes) and every malformed entry or record skipped and
// counted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "quota_exchange.h"
#include "redis_reply_budget.h"
#include "interval_loop.h"
#include "syncd_metrics.h"

struct redisContext;
struct redisReply;

namespace keyauth::syncd {

struct QuotaRedisOptions {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::string user;      // empty: AUTH with the password alone (if any)
    std::string password;  // from the environment, never argv; never logged
    std::string stream = "keyauth:quota";
    std::chrono::milliseconds interval{200};
    std::chrono::milliseconds timeout{1000};  // to connect, and each command
    int64_t retention_ms = 600000;            // what the stream keeps
};

// "redis://[user@]host[:port]" into o's host, port and user; false with
// error otherwise (a password in the URL is refused: it would be in argv).
bool parse_quota_redis_url(const std::string &url, QuotaRedisOptions &o, std::string &error);

class QuotaRedis {
public:
    static constexpr size_t kReadCount = 128;      // entries an XREAD takes
    static constexpr size_t kReadsPerRound = 32;   // then the rest next round
    static constexpr size_t kMaxSubjects = 1u << 18;  // tracked (a ledger's slots)
    static constexpr size_t kMaxEdges = 256;       // tracked per subject

    QuotaRedis(QuotaRedisOptions options, QuotaExchange &exchange, Metrics &metrics);
    ~QuotaRedis();
    QuotaRedis(const QuotaRedis &) = delete;
    QuotaRedis &operator=(const QuotaRedis &) = delete;

    // One round at now_ms (Unix ms): false (counted, logged when it starts
    // failing) if Redis could not be reached or answered out of shape.
    bool exchange_once(int64_t now_ms);
    // Rounds every interval until stop().
    void run();
    void stop();

    // The other edges' use as last summed (tests).
    QuotaExchange::Sums sums() const;

private:
    using Heard = std::map<std::string, std::pair<uint16_t, uint64_t>>;  // by edge id hex

    bool round(int64_t now_ms, std::string &error);
    bool connect(std::string &error);
    void disconnect();
    // The reply (owned by the caller: freeReplyObject), null with error.
    redisReply *command(const std::vector<std::string> &args, std::string &error);
    bool publish(const QuotaExchange::LedgerView &view, int64_t now_ms, std::string &error);
    bool read(const QuotaExchange::LedgerView &view, std::string &error);
    // One XREAD reply's entries; false when the reply is out of shape.
    bool take_read(const redisReply *r, const std::string &own, size_t &entries, std::string &error);
    void take_entry(const redisReply *fields, const std::string &own);
    void prune_and_sum(int64_t now_ms);

    QuotaRedisOptions options_;
    QuotaExchange &exchange_;
    Metrics &metrics_;
    redisContext *ctx_ = nullptr;
    RedisReplyBudget budget_;
    // What was last published of this edge's use, by subject key.
    std::map<std::string, std::pair<uint16_t, uint64_t>> published_;
    int64_t published_all_ms_ = 0;
    uint64_t trim_before_ms_ = 0;  // MINID of the next XADD (Redis's ms); 0: none yet
    std::string last_id_ = "0-0";  // the newest entry read
    std::map<std::string, Heard> heard_;  // by subject key
    mutable std::mutex sums_mu_;
    QuotaExchange::Sums sums_;
    bool failing_ = false;
    IntervalLoop loop_;
};

}  // namespace keyauth::syncd
