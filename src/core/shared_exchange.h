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
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
    bool more = false;       // the read stopped at its count: exchange again now
};

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
    enum class Expect { kAuth, kLatest, kAdd, kExpire, kRead };

    void add_command(const std::vector<std::string> &args, Expect expect);
    void clear_replies() noexcept;
    bool take_latest(const redisReply *r, std::string &err);
    bool take_added(const redisReply *r, std::string &err);
    bool take_read(const redisReply *r, RateTable &table, uint64_t now_ns, const RateLock &lock,
                   ExchangeResult &out, std::string &err);
    bool take_entry(const redisReply *entry, RateTable &table, uint64_t now_ns,
                    const RateLock &lock, ExchangeResult &out, std::string &err);

    struct Budget;  // what the reply parser may still allocate

    SharedSettings settings_;
    std::unique_ptr<Budget> budget_;
    std::string edge_tag_;       // edge_id as 16 hex digits
    bool authenticated_ = false;
    std::string last_id_;        // the newest entry read; empty: not known yet
    uint64_t trim_before_ms_ = 0;  // MINID of the next XADD; 0: none yet

    std::string request_;
    size_t drained_ = 0;
    std::vector<Expect> expected_;
    std::vector<redisReply *> replies_;
    redisReader *reader_ = nullptr;
    size_t reply_bytes_ = 0;
};

}  // namespace keyauth
