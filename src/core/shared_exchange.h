// One edge's side of keyauth_shared_limits: every exchange sends Redis one
// pipeline that publishes the requests each key spent here since the last
// exchange (a stream entry per 1,024 keys, tagged with this edge's id) and
// reads the entries other edges added since the last read; what they spent
// is then folded into the local GCRA states. The nginx glue owns the socket
// and the timer; this class owns the protocol (formatted and parsed by
// hiredis), holds no nginx type and never blocks.
//
// Stream (docs/shared-limits.md): XADD <stream> [MINID ~ <now-60s>] * e
// <edge id, 16 hex> s <spent batch>; EXPIRE <stream> 60 after each publish,
// so an idle fleet leaves nothing behind. Needs Redis >= 6.2 (MINID).
//
// Whatever the stream holds, one exchange charges a key at most what the
// fleet, sharing one limit, could have admitted since the previous exchange:
// a burst plus the refill, at the key's rate as this edge knows it (fold_bound
// below), and never leaves it more than two bursts in debt. Stream ids that go
// backwards (Redis's clock behind, the stream lost) are detected at the next
// publish, or by asking for the newest id after kQuietProbeNs of empty reads,
// and the read resynchronised (ExchangeResult::resynced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gcra.h"
#include "keyauth_schema.h"
#include "rate_table.h"

struct redisReader;
struct redisReply;

namespace keyauth {

struct SharedSettings {
    std::string stream = "keyauth:spent";
    std::string user;      // AUTH user (Redis 6 ACL); empty: the default user
    std::string password;  // empty: no AUTH
    uint64_t edge_id = 0;  // this edge's tag on its entries
};

struct ExchangeResult {
    size_t published = 0;    // keys whose spent counts went out
    size_t folded = 0;       // key entries of other edges charged here
    size_t unplaced = 0;     // ... not charged: no room in the zone but live states
    size_t entries = 0;      // stream entries read, this edge's own included
    size_t bad_entries = 0;  // entries of an unknown layout: skipped
    size_t capped = 0;       // keys whose charge was cut to fold_bound's
    bool more = false;       // the read stopped at its count: exchange again now
    // the stream's ids went backwards: this edge's newest entry got an id not
    // above the last one it read (Redis's clock is behind the ids read, or
    // the stream was lost); this read was not charged, and reading goes on
    // after that entry. Sharing was not working until now.
    bool resynced = false;
    std::string resync_detail;  // "read up to <id>, added <id>"
};

// The most one exchange charges a key (docs/shared-limits.md, "What a wrong
// Redis can do"), in the key's time at params (its rate as this edge knows
// it: b = burst, T = interval): one burst plus what the key refills in
// since_last_ns, the time since the previous exchange, itself at most a
// burst's worth: allowance = b*T + min(since_last, b*T). After the fold the
// key's TAT is at most now + ceiling = now + 2*b*T.
struct FoldBound {
    uint64_t allowance_ns;
    uint64_t ceiling_ns;
};
FoldBound fold_bound(const GcraParams &params, uint64_t since_last_ns) noexcept;

// The charge of `requests` at params, cut to the allowance; *capped says
// whether it was cut.
uint64_t bounded_charge(uint64_t requests, const GcraParams &params, const FoldBound &bound,
                        bool *capped) noexcept;

class SharedExchange {
public:
    static constexpr size_t kReadCount = 128;              // entries a read takes
    // One exchange's answer: 128 entries of at most 20 KiB, and their frame.
    static constexpr size_t kMaxReplyBytes = 4u << 20;
    static constexpr int kMaxElements = 4096;              // one array in it
    static constexpr size_t kMaxObjects = 65536;           // all of them (about
                                                           // 1,500 in a full one)
    static constexpr int64_t kRetentionMs = 60000;         // the stream keeps a minute
    static constexpr size_t kMaxIdLen = 41;                // "<ms>-<seq>", two u64
    // an edge that neither publishes nor reads anything for this long asks
    // for the stream's newest id once: ids gone backwards show there too
    static constexpr uint64_t kQuietProbeNs = 5'000'000'000ULL;

    explicit SharedExchange(SharedSettings settings);
    ~SharedExchange();
    SharedExchange(const SharedExchange &) = delete;
    SharedExchange &operator=(const SharedExchange &) = delete;

    // A new connection: AUTH goes first again, the parser starts afresh, and
    // reading starts from the stream's newest entry, so what other edges
    // spent while this one was cut off is not charged here (its own
    // consumption of that time was not published either).
    void reset() noexcept;

    // Takes the table's spent counts and writes this exchange's pipeline.
    void begin(RateTable &table);
    const std::string &request() const noexcept { return request_; }
    // keys whose counts begin() took (published once finish() succeeds)
    size_t drained() const noexcept { return drained_; }

    enum class Feed { kMore, kDone, kError };
    // Bytes read from the connection; kDone once every reply is in.
    Feed feed(const char *data, size_t len, std::string &err);

    // After kDone: checks every reply and charges what other edges spent.
    // false with err if Redis refused a command or answered out of shape.
    bool finish(RateTable &table, uint64_t now_ns, const RateLock &lock, ExchangeResult &out,
                std::string &err);

    const std::string &last_id() const noexcept { return last_id_; }

private:
    struct Spent {  // one key's count in one entry of the read
        unsigned char id[KA_ID_LEN];
        uint32_t spent;
        uint32_t rate;
    };
    void fold_read(RateTable &table, uint64_t now_ns, const RateLock &lock, ExchangeResult &out);

    enum class Expect { kAuth, kLatest, kProbe, kAdd, kExpire, kRead };

    void add_command(const std::vector<std::string> &args, Expect expect);
    void clear_replies() noexcept;
    bool take_latest(const redisReply *r, std::string &err, std::string *newest = nullptr);
    void backwards(std::string_view id, ExchangeResult &out);
    bool take_added(const redisReply *r, ExchangeResult &out, std::string &err);
    bool take_read(const redisReply *r, RateTable &table, uint64_t now_ns, const RateLock &lock,
                   ExchangeResult &out, std::string &err);
    bool take_entry(const redisReply *entry, ExchangeResult &out, std::string &err);

    struct Budget;  // what the reply parser may still allocate

    SharedSettings settings_;
    std::unique_ptr<Budget> budget_;
    std::string edge_tag_;       // edge_id as 16 hex digits
    bool authenticated_ = false;
    std::string last_id_;        // the newest entry read; empty: not known yet
    uint64_t trim_before_ms_ = 0;  // MINID of the next XADD; 0: none yet
    std::string last_added_;     // this edge's newest entry; empty: none on
                                 // this connection yet
    uint64_t last_exchange_ns_ = 0;  // when the previous exchange finished
                                     // (0: none on this connection)
    std::vector<Spent> read_;    // the read's counts, folded per key
    std::string resync_to_;      // where reading resumes after a resync
    uint64_t quiet_since_ns_ = 0;  // nothing published nor read since
    bool probe_ = false;         // the next exchange asks for the newest id

    std::string request_;
    size_t drained_ = 0;
    std::vector<Expect> expected_;
    std::vector<redisReply *> replies_;
    redisReader *reader_ = nullptr;
    size_t reply_bytes_ = 0;
};

}  // namespace keyauth
