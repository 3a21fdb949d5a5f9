#include "shared_exchange.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "gcra.h"
#include "redis_reply_budget.h"
#include "spent_batch.h"

namespace keyauth {
namespace {

std::string_view text_of(const redisReply *r) {
    return std::string_view(r->str, r->len);
}

bool is_text(const redisReply *r) {
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

struct StreamId {
    uint64_t ms = 0;
    uint64_t seq = 0;
    bool operator<=(const StreamId &o) const noexcept {
        return ms < o.ms || (ms == o.ms && seq <= o.seq);
    }
};

// "<ms>-<seq>", both decimal u64 (Redis's own bounds); the parts out if given.
bool valid_id(std::string_view id, StreamId *out = nullptr) {
    if (id.empty() || id.size() > SharedExchange::kMaxIdLen) return false;
    size_t dash = id.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash + 1 == id.size() || dash > 20 ||
        id.size() - dash - 1 > 20) {
        return false;
    }
    uint64_t part[2] = {0, 0};
    for (size_t i = 0; i < id.size(); i++) {
        if (i == dash) continue;
        if (id[i] < '0' || id[i] > '9') return false;
        uint64_t &v = part[i < dash ? 0 : 1];
        const uint64_t digit = static_cast<uint64_t>(id[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) return false;
        v = v * 10 + digit;
    }
    if (out) *out = StreamId{part[0], part[1]};
    return true;
}

// Redis's words in an error, printable and short: they go to the error log.
std::string redis_error(const char *what, const redisReply *r) {
    std::string out = std::string(what) + ": Redis answered \"";
    std::string_view t = text_of(r).substr(0, 120);
    for (char c : t) out.push_back(c >= 0x20 && c < 0x7f && c != '"' ? c : '?');
    return out + "\"";
}

}  // namespace

struct SharedExchange::Budget : RedisReplyBudget {};

FoldBound fold_bound(const GcraParams &params, uint64_t since_last_ns) noexcept {
    // b*T: the time the key's burst takes at its rate (60 s when the burst
    // is the rate per minute, whatever the rate)
    const uint64_t burst_ns = params.tolerance_ns + params.interval_ns;
    return FoldBound{burst_ns + std::min(since_last_ns, burst_ns), 2 * burst_ns};
}

uint64_t bounded_charge(uint64_t requests, const GcraParams &params, const FoldBound &bound,
                        bool *capped) noexcept {
    const uint64_t t = std::max<uint64_t>(params.interval_ns, 1);
    const bool cut = requests > bound.allowance_ns / t;
    if (capped) *capped = cut;
    return cut ? bound.allowance_ns : requests * t;
}

SharedExchange::SharedExchange(SharedSettings settings)
    : settings_(std::move(settings)), budget_(std::make_unique<Budget>()) {
    char tag[17];
    std::snprintf(tag, sizeof(tag), "%016" PRIx64, settings_.edge_id);
    edge_tag_ = tag;
}

SharedExchange::~SharedExchange() {
    clear_replies();
    if (reader_) redisReaderFree(reader_);
}

void SharedExchange::reset() noexcept {
    authenticated_ = false;
    last_id_.clear();
    last_added_.clear();
    last_exchange_ns_ = 0;
    read_.clear();
    resync_to_.clear();
    quiet_since_ns_ = 0;
    probe_ = false;
    clear_replies();
    expected_.clear();
    request_.clear();
    drained_ = 0;
}

void SharedExchange::clear_replies() noexcept {
    for (redisReply *r : replies_) freeReplyObject(r);
    replies_.clear();
    if (reader_) {
        redisReaderFree(reader_);
        reader_ = nullptr;
    }
    reply_bytes_ = 0;
}

void SharedExchange::add_command(const std::vector<std::string> &args, Expect expect) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const std::string &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    char *cmd = nullptr;
    int n = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0 || cmd == nullptr) throw std::bad_alloc();
    request_.append(cmd, static_cast<size_t>(n));
    redisFreeCommand(cmd);
    expected_.push_back(expect);
}

void SharedExchange::begin(RateTable &table) {
    clear_replies();
    expected_.clear();
    request_.clear();
    drained_ = 0;

    if (!authenticated_ && !settings_.password.empty()) {
        if (settings_.user.empty()) {
            add_command({"AUTH", settings_.password}, Expect::kAuth);
        } else {
            add_command({"AUTH", settings_.user, settings_.password}, Expect::kAuth);
        }
    }

    // where reading starts: the newest entry now (the stream may be empty);
    // or, after a quiet while, whether the newest entry is below the last
    // one read
    if (last_id_.empty() || probe_) {
        add_command({"XREVRANGE", settings_.stream, "+", "-", "COUNT", "1"},
                    last_id_.empty() ? Expect::kLatest : Expect::kProbe);
    }
    probe_ = false;

    std::vector<std::string> batches;
    struct Collect {
        std::vector<std::string> *batches;
        size_t keys = 0;
    } collect{&batches};
    drained_ = table.drain(
        [](void *data, const unsigned char id[KA_ID_LEN], uint32_t spent, uint32_t rate) {
            auto *c = static_cast<Collect *>(data);
            if (c->keys % kSpentBatchMaxKeys == 0) c->batches->emplace_back();
            SpentEntry e;
            std::memcpy(e.id, id, KA_ID_LEN);
            e.spent = spent;
            e.rate_per_minute = rate;
            append_spent(c->batches->back(), e);
            c->keys++;
        },
        &collect);

    for (std::string &b : batches) {
        std::vector<std::string> xadd{"XADD", settings_.stream};
        if (trim_before_ms_ > 0) {
            xadd.insert(xadd.end(), {"MINID", "~", std::to_string(trim_before_ms_) + "-0"});
        }
        xadd.insert(xadd.end(), {"*", "e", edge_tag_, "s", std::move(b)});
        add_command(xadd, Expect::kAdd);
    }
    if (!batches.empty()) {
        add_command({"EXPIRE", settings_.stream, std::to_string(kRetentionMs / 1000)},
                    Expect::kExpire);
    }
    if (!last_id_.empty()) {
        add_command({"XREAD", "COUNT", std::to_string(kReadCount), "STREAMS", settings_.stream,
                     last_id_},
                    Expect::kRead);
    }
}

SharedExchange::Feed SharedExchange::feed(const char *data, size_t len, std::string &err) {
    if (reader_ == nullptr) {
        redisReplyObjectFunctions *fns = capped_reply_functions();
        reader_ = fns ? redisReaderCreateWithFunctions(fns) : nullptr;
        if (reader_ == nullptr) {
            err = "out of memory for the Redis reply parser";
            return Feed::kError;
        }
        budget_->objects_left = kMaxObjects;
        budget_->max_elements = kMaxElements;
        budget_->refused = nullptr;
        reader_->privdata = budget_.get();
    }
    reply_bytes_ += len;
    if (reply_bytes_ > kMaxReplyBytes) {
        err = "Redis answered more than " + std::to_string(kMaxReplyBytes) + " bytes";
        return Feed::kError;
    }
    if (replies_.size() >= expected_.size()) {
        err = "Redis sent bytes nobody asked for";
        return Feed::kError;
    }
    if (len > 0 && redisReaderFeed(reader_, data, len) != REDIS_OK) {
        err = std::string("unreadable Redis reply: ") + reader_->errstr;
        return Feed::kError;
    }
    while (replies_.size() < expected_.size()) {
        void *reply = nullptr;
        if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
            err = std::string("unreadable Redis reply: ") +
                  (budget_->refused ? budget_->refused : reader_->errstr);
            return Feed::kError;
        }
        if (reply == nullptr) return Feed::kMore;
        replies_.push_back(static_cast<redisReply *>(reply));
    }
    // Redis answers each command once: anything more is not Redis speaking
    if (reader_->pos < reader_->len) {
        err = "Redis sent bytes nobody asked for";
        return Feed::kError;
    }
    return Feed::kDone;
}

bool SharedExchange::finish(RateTable &table, uint64_t now_ns, const RateLock &lock,
                            ExchangeResult &out, std::string &err) {
    out = ExchangeResult{};
    read_.clear();
    if (replies_.size() != expected_.size()) {
        err = "the exchange is not complete";
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < replies_.size(); i++) {
        const redisReply *r = replies_[i];
        switch (expected_[i]) {
        case Expect::kAuth:
            if (r->type == REDIS_REPLY_ERROR) {
                err = redis_error("AUTH was refused", r);
                ok = false;
            } else if (!(r->type == REDIS_REPLY_STATUS && text_of(r) == "OK")) {
                err = "AUTH: not a Redis answer";
                ok = false;
            } else {
                authenticated_ = true;
            }
            break;
        case Expect::kLatest:
            ok = take_latest(r, err);
            break;
        case Expect::kProbe: {
            std::string newest;
            StreamId n{}, read{};
            ok = take_latest(r, err, &newest);
            if (ok && !newest.empty() && valid_id(newest, &n) && valid_id(last_id_, &read) &&
                n <= read && !(read <= n)) {
                backwards(newest, out);
            }
            break;
        }
        case Expect::kAdd:
            ok = take_added(r, out, err);
            break;
        case Expect::kExpire:
            if (r->type != REDIS_REPLY_INTEGER) {
                err = r->type == REDIS_REPLY_ERROR ? redis_error("EXPIRE", r)
                                                   : "EXPIRE: not a Redis answer";
                ok = false;
            }
            break;
        case Expect::kRead:
            ok = take_read(r, table, now_ns, lock, out, err);
            break;
        }
    }
    if (ok && out.resynced) {
        // the read went from an id the stream's new entries are below: what
        // it brought (if anything) is read again from after this edge's
        // newest entry, and charged then
        last_id_ = resync_to_;
        out.more = false;
        out.entries = 0;
        out.bad_entries = 0;
        read_.clear();
    }
    if (ok) {
        fold_read(table, now_ns, lock, out);
        out.published = drained_;
        last_exchange_ns_ = now_ns;
        // an edge that publishes finds ids gone backwards by its own entry;
        // one that only reads, and reads nothing for a while, asks
        if (out.entries > 0 || drained_ > 0 || out.resynced || quiet_since_ns_ == 0) {
            quiet_since_ns_ = now_ns;
        } else if (now_ns - quiet_since_ns_ >= kQuietProbeNs) {
            probe_ = true;
            quiet_since_ns_ = now_ns;
        }
    }
    read_.clear();
    clear_replies();
    expected_.clear();
    return ok;
}

// The newest entry's id: where reading starts (newest null), or what a
// probe found (newest out; empty: no stream).
bool SharedExchange::take_latest(const redisReply *r, std::string &err, std::string *newest) {
    if (r->type == REDIS_REPLY_ERROR) {
        err = redis_error("XREVRANGE", r);
        return false;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements > 1) {
        err = "XREVRANGE: not a Redis answer";
        return false;
    }
    if (r->elements == 0) {
        if (newest == nullptr) last_id_ = "0-0";  // an empty stream: read it from its start
        return true;
    }
    const redisReply *entry = r->element[0];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
        !is_text(entry->element[0]) || !valid_id(text_of(entry->element[0]))) {
        err = "XREVRANGE: not a stream entry";
        return false;
    }
    if (newest) {
        newest->assign(text_of(entry->element[0]));
    } else {
        last_id_.assign(text_of(entry->element[0]));
    }
    return true;
}

// The stream's ids went backwards: id (an entry of now) is not above the
// last one read. Reading resumes after the newest such entry seen.
void SharedExchange::backwards(std::string_view id, ExchangeResult &out) {
    if (!out.resynced) {
        out.resync_detail = "read up to " + (last_id_.empty() ? std::string("-") : last_id_) +
                            ", now " + std::string(id);
    }
    out.resynced = true;
    resync_to_.assign(id);
}

bool SharedExchange::take_added(const redisReply *r, ExchangeResult &out, std::string &err) {
    StreamId id;
    if (r->type == REDIS_REPLY_ERROR) {
        err = redis_error("XADD", r);
        return false;
    }
    if (!is_text(r) || !valid_id(text_of(r), &id)) {
        err = "XADD: not a stream entry id";
        return false;
    }
    // A stream's ids only grow: an entry added now is above every entry read
    // and added before, unless the stream was lost and made again by a Redis
    // whose clock is behind them (a failover, a clock stepped back while the
    // stream expired, an entry with an id in the future). Then a read from
    // the last id finds nothing, ever: resynchronise after this entry.
    StreamId read{}, added{};
    if ((!last_id_.empty() && valid_id(last_id_, &read) && id <= read) ||
        (!last_added_.empty() && valid_id(last_added_, &added) && id <= added)) {
        backwards(text_of(r), out);
    }
    last_added_.assign(text_of(r));
    // Redis's clock, not this host's: the next publish trims what is older
    // than a minute
    trim_before_ms_ = id.ms > static_cast<uint64_t>(kRetentionMs) ? id.ms - kRetentionMs : 0;
    return true;
}

bool SharedExchange::take_read(const redisReply *r, RateTable &, uint64_t, const RateLock &,
                               ExchangeResult &out, std::string &err) {
    if (r->type == REDIS_REPLY_ERROR) {
        err = redis_error("XREAD", r);
        return false;
    }
    if (r->type == REDIS_REPLY_NIL) return true;  // nothing new
    // [[stream, [[id, [field, value, ...]], ...]]]
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 2 ||
        r->element[0]->element[1]->type != REDIS_REPLY_ARRAY) {
        err = "XREAD: not a Redis answer";
        return false;
    }
    const redisReply *entries = r->element[0]->element[1];
    for (size_t i = 0; i < entries->elements; i++) {
        if (!take_entry(entries->element[i], out, err)) return false;
    }
    out.more = entries->elements >= kReadCount;
    return true;
}

bool SharedExchange::take_entry(const redisReply *entry, ExchangeResult &out, std::string &err) {
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
        !is_text(entry->element[0]) || !valid_id(text_of(entry->element[0])) ||
        entry->element[1]->type != REDIS_REPLY_ARRAY) {
        err = "XREAD: not a stream entry";
        return false;
    }
    last_id_.assign(text_of(entry->element[0]));
    out.entries++;

    const redisReply *fields = entry->element[1];
    const redisReply *edge = nullptr;
    const redisReply *batch = nullptr;
    for (size_t f = 0; f + 1 < fields->elements; f += 2) {
        const redisReply *name = fields->element[f];
        const redisReply *value = fields->element[f + 1];
        if (!is_text(name) || !is_text(value)) continue;
        if (text_of(name) == "e") edge = value;
        if (text_of(name) == "s") batch = value;
    }
    if (edge == nullptr || batch == nullptr) {
        out.bad_entries++;
        return true;
    }
    if (text_of(edge) == edge_tag_) return true;  // this edge's own

    bool valid = read_spent_batch(text_of(batch), [&](const SpentEntry &e) {
        Spent s;
        std::memcpy(s.id, e.id, KA_ID_LEN);
        s.spent = e.spent;
        s.rate = e.rate_per_minute;
        read_.push_back(s);
    });
    if (!valid) out.bad_entries++;
    return true;
}

// Every key of the read is charged once, with what all its entries say
// (however many there are), at its rate as this edge knows it, and cut to
// fold_bound: no entry, nor any number of them, charges a key more than the
// fleet could have admitted since the previous exchange.
void SharedExchange::fold_read(RateTable &table, uint64_t now_ns, const RateLock &lock,
                               ExchangeResult &out) {
    if (read_.empty()) return;
    std::sort(read_.begin(), read_.end(), [](const Spent &a, const Spent &b) {
        return std::memcmp(a.id, b.id, KA_ID_LEN) < 0;
    });
    const uint64_t since_last =
        last_exchange_ns_ != 0 && now_ns > last_exchange_ns_ ? now_ns - last_exchange_ns_ : 0;
    for (size_t i = 0; i < read_.size();) {
        size_t end = i;
        uint64_t requests = 0;
        uint32_t claimed_rate = 0;
        for (; end < read_.size() && std::memcmp(read_[end].id, read_[i].id, KA_ID_LEN) == 0;
             end++) {
            requests += read_[end].spent;
            claimed_rate = std::max(claimed_rate, read_[end].rate);
        }
        // the rate this edge admitted the key at; else (it has not served
        // it) the entries' own, the most lenient of them if they differ: an
        // entry's rate can only make the key's charge smaller than honest
        // entries would, never larger than the bound
        uint32_t rate = table.known_rate(read_[i].id);
        if (rate == 0) rate = claimed_rate;
        const GcraParams params = GcraParams::per_minute(rate);
        const FoldBound bound = fold_bound(params, since_last);
        bool capped = false;
        const uint64_t charge = bounded_charge(requests, params, bound, &capped);
        if (capped) out.capped++;
        if (table.fold(read_[i].id, charge, bound.ceiling_ns, now_ns, lock)) {
            out.folded++;
        } else {
            out.unplaced++;
        }
        i = end;
    }
}

}  // namespace keyauth
