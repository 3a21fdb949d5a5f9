#include "quota_redis.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "quota_batch.h"
#include "syncd_log.h"

namespace keyauth::syncd {
namespace {

// One XREAD answer at most: 128 entries of a 1,024-record batch and their
// frame, in objects, one array's elements, and string bytes.
constexpr size_t kMaxObjects = 4096;
constexpr int kMaxElements = 256;
constexpr size_t kMaxReplyBytes = 4u << 20;
constexpr size_t kMaxFields = 16;  // an entry's field-value pairs we look at
constexpr size_t kMaxIdLen = 41;   // "<ms>-<seq>", two u64

std::string hex(const unsigned char *p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; i++) {
        out += digits[p[i] >> 4];
        out += digits[p[i] & 15];
    }
    return out;
}

bool is_edge_hex(std::string_view s) {
    return s.size() == 2 * KA_USAGE_EDGE_ID_LEN &&
           std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "<ms>-<seq>", each 1 to 20 digits.
bool is_stream_id(std::string_view id) {
    const size_t dash = id.find('-');
    if (id.size() > kMaxIdLen || dash == std::string_view::npos || dash == 0 || dash > 20 ||
        dash + 1 == id.size() || id.size() - dash - 1 > 20) {
        return false;
    }
    for (size_t i = 0; i < id.size(); i++) {
        if (i != dash && (id[i] < '0' || id[i] > '9')) return false;
    }
    return true;
}

bool is_text(const redisReply *r) { return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS); }
std::string_view text_of(const redisReply *r) { return std::string_view(r->str, r->len); }

struct ReplyFree {
    void operator()(redisReply *r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

uint64_t saturating_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

}  // namespace

bool parse_quota_redis_url(const std::string &url, QuotaRedisOptions &o, std::string &error) {
    const std::string scheme = "redis://";
    if (url.compare(0, scheme.size(), scheme) != 0) {
        error = "needs redis://[user@]host[:port]";
        return false;
    }
    std::string rest = url.substr(scheme.size());
    if (!rest.empty() && rest.back() == '/') rest.pop_back();
    const size_t at = rest.rfind('@');
    std::string user;
    if (at != std::string::npos) {
        user = rest.substr(0, at);
        rest = rest.substr(at + 1);
        if (user.empty() || user.find(':') != std::string::npos) {
            error = "takes no password (set KEYAUTH_SYNCD_REDIS_PASSWORD): redis://[user@]host[:port]";
            return false;
        }
    }
    std::string host = rest, port = "6379";
    if (!rest.empty() && rest[0] == '[') {  // [IPv6]:port
        const size_t close = rest.find(']');
        if (close == std::string::npos) {
            error = "an unclosed [ in the host";
            return false;
        }
        host = rest.substr(1, close - 1);
        if (close + 1 < rest.size()) {
            if (rest[close + 1] != ':') {
                error = "needs redis://[user@]host[:port]";
                return false;
            }
            port = rest.substr(close + 2);
        }
    } else if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
    }
    if (host.empty() || host.find_first_of("/?#@ ") != std::string::npos) {
        error = "needs a host: redis://[user@]host[:port]";
        return false;
    }
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535) {
        error = "needs a port from 1 to 65535";
        return false;
    }
    o.host = host;
    o.port = std::stoi(port);
    o.user = user;
    return true;
}

QuotaRedis::QuotaRedis(QuotaRedisOptions options, QuotaExchange &exchange, Metrics &metrics)
    : options_(std::move(options)), exchange_(exchange), metrics_(metrics) {}

QuotaRedis::~QuotaRedis() { disconnect(); }

void QuotaRedis::disconnect() {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    metrics_.set_quota_redis_up(false);
}

bool QuotaRedis::connect(std::string &error) {
    const auto ms = options_.timeout.count();
    const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>(ms % 1000 * 1000)};
    ctx_ = redisConnectWithTimeout(options_.host.c_str(), options_.port, tv);
    if (ctx_ == nullptr || ctx_->err) {
        error = ctx_ ? std::string("cannot connect to Redis: ") + ctx_->errstr : "out of memory";
        disconnect();
        return false;
    }
    // every reply within a budget (redis_reply_budget.h), every command within the timeout
    redisReplyObjectFunctions *fns = capped_reply_functions();
    redisReader *capped = fns ? redisReaderCreateWithFunctions(fns) : nullptr;
    if (capped == nullptr || redisSetTimeout(ctx_, tv) != REDIS_OK) {
        if (capped) redisReaderFree(capped);
        error = "cannot set up the Redis connection";
        disconnect();
        return false;
    }
    redisReaderFree(ctx_->reader);
    ctx_->reader = capped;
    ctx_->reader->privdata = &budget_;
    if (!options_.password.empty()) {
        std::vector<std::string> auth{"AUTH"};
        if (!options_.user.empty()) auth.push_back(options_.user);
        auth.push_back(options_.password);
        Reply r(command(auth, error));
        if (!r) return false;
        if (r->type != REDIS_REPLY_STATUS) {
            error = "Redis refused AUTH";  // its words might echo what was sent
            disconnect();
            return false;
        }
    }
    published_.clear();  // everything again: Redis may have lost it
    metrics_.set_quota_redis_up(true);
    return true;
}

redisReply *QuotaRedis::command(const std::vector<std::string> &args, std::string &error) {
    std::vector<const char *> argv;
    std::vector<size_t> lens;
    for (const std::string &a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    budget_ = RedisReplyBudget{kMaxObjects, kMaxElements, kMaxReplyBytes, nullptr};
    void *reply = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (reply == nullptr) {
        error = std::string("Redis ") + args[0] + ": " +
                (budget_.refused ? budget_.refused : ctx_->err ? ctx_->errstr : "no answer");
        disconnect();
        return nullptr;
    }
    auto *r = static_cast<redisReply *>(reply);
    if (r->type == REDIS_REPLY_ERROR) {
        error = std::string("Redis ") + args[0] + " failed: " + std::string(text_of(r).substr(0, 200));
        freeReplyObject(r);
        disconnect();  // a fresh connection next round
        return nullptr;
    }
    return r;
}

bool QuotaRedis::exchange_once(int64_t now_ms) {
    std::string error;
    bool ok = false;
    try {
        ok = round(now_ms, error);
    } catch (const std::exception &e) {  // bad_alloc: the next round may do better
        error = e.what();
        disconnect();
    }
    metrics_.add_quota_redis_round();
    if (!ok) {
        metrics_.add_quota_redis_error();
        if (!failing_) log_event("quota redis failed", {{"error", error}});
        failing_ = true;
        return false;
    }
    if (failing_) log_event("quota redis recovered");
    failing_ = false;
    return true;
}

bool QuotaRedis::round(int64_t now_ms, std::string &error) {
    QuotaExchange::LedgerView view;
    if (!exchange_.attach(view, error)) return false;
    if (!ctx_ && !connect(error)) return false;
    if (view.ledger && view.have_edge_id && !publish(view, now_ms, error)) return false;
    if (!read(view, error)) return false;
    prune_and_sum(now_ms);
    if (!exchange_.set_redis_others(sums(), now_ms)) {
        error = "the quota ledger has no room for another subject";
        return false;
    }
    return true;
}

bool QuotaRedis::publish(const QuotaExchange::LedgerView &view, int64_t now_ms, std::string &error) {
    if (now_ms - published_all_ms_ >= options_.retention_ms / 2) {
        published_.clear();  // all again, before the stream trims the last copy away
        published_all_ms_ = now_ms;
    }
    std::vector<std::string> batches;
    std::map<std::string, std::pair<uint16_t, uint64_t>> live;
    std::string batch;
    view.ledger->for_each([&](const QuotaLedger::Entry &e) {
        if (!quota_tag_current(e.tag, now_ms)) return;
        const std::string k = subject_key(e.subject, e.id, e.tag);
        // nothing used is news only where something was said before (a
        // total released by the ledger's sweep: the others drop it too)
        if (e.used == 0 && published_.count(k) == 0) return;
        const std::pair<uint16_t, uint64_t> use{e.tag, std::min(e.used, kMaxQuotaUnits)};
        live[k] = use;
        auto it = published_.find(k);
        if (it != published_.end() && it->second == use) return;
        QuotaRecord r;
        r.subject = e.subject;
        std::memcpy(r.id.data(), e.id, KA_ID_LEN);
        r.tag = use.first;
        r.units = use.second;
        append_quota_record(batch, r);
        if (batch.size() == kMaxQuotaRecords * kQuotaRecordBytes) batches.push_back(std::move(batch)), batch.clear();
    });
    if (!batch.empty()) batches.push_back(std::move(batch));
    if (batches.empty()) {
        published_ = std::move(live);
        return true;
    }
    const std::string edge = hex(view.edge_id, KA_USAGE_EDGE_ID_LEN);
    for (const std::string &b : batches) {
        std::vector<std::string> xadd{"XADD", options_.stream};
        if (trim_before_ms_ > 0) {  // by Redis's clock, whatever ours says
            xadd.insert(xadd.end(), {"MINID", "~", std::to_string(trim_before_ms_)});
        }
        xadd.insert(xadd.end(), {"*", "e", edge, "q", b});
        Reply r(command(xadd, error));
        if (!r) return false;  // what was not published differs still: the next round
        if (!is_text(r.get()) || !is_stream_id(text_of(r.get()))) {
            error = "Redis XADD answered out of shape";
            disconnect();
            return false;
        }
        // "<ms>-<seq>", digits checked: strtoull stops at the dash (and saturates)
        const uint64_t added_ms = std::strtoull(std::string(text_of(r.get())).c_str(), nullptr, 10);
        const auto retention = static_cast<uint64_t>(options_.retention_ms);
        trim_before_ms_ = added_ms > retention ? added_ms - retention : 0;
        metrics_.add_quota_redis_published(b.size() / kQuotaRecordBytes);
    }
    Reply r(command({"EXPIRE", options_.stream, std::to_string(options_.retention_ms / 1000)}, error));
    if (!r) return false;
    published_ = std::move(live);
    return true;
}

bool QuotaRedis::read(const QuotaExchange::LedgerView &view, std::string &error) {
    const std::string own = view.have_edge_id ? hex(view.edge_id, KA_USAGE_EDGE_ID_LEN) : "";
    for (size_t i = 0; i < kReadsPerRound; i++) {
        Reply r(command({"XREAD", "COUNT", std::to_string(kReadCount), "STREAMS", options_.stream, last_id_},
                        error));
        if (!r) return false;
        size_t entries = 0;
        if (!take_read(r.get(), own, entries, error)) {
            disconnect();
            return false;
        }
        if (entries < kReadCount) break;  // caught up
    }
    return true;
}

// nil (nothing new), or [[stream, [[id, [field, value, ...]], ...]]]
bool QuotaRedis::take_read(const redisReply *r, const std::string &own, size_t &entries, std::string &error) {
    error = "Redis XREAD answered out of shape";
    if (r->type == REDIS_REPLY_NIL) return true;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 1) return false;
    const redisReply *s = r->element[0];
    if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 || !is_text(s->element[0]) ||
        s->element[1]->type != REDIS_REPLY_ARRAY || s->element[1]->elements > kReadCount) {
        return false;
    }
    const redisReply *list = s->element[1];
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || !is_text(e->element[0]) ||
            !is_stream_id(text_of(e->element[0]))) {
            return false;  // no id to go on from
        }
        last_id_ = std::string(text_of(e->element[0]));
        take_entry(e->element[1], own);
    }
    entries = list->elements;
    error.clear();
    return true;
}

// One entry's fields: e <edge id> q <batch>; anything else is skipped and counted.
void QuotaRedis::take_entry(const redisReply *fields, const std::string &own) {
    const redisReply *edge = nullptr, *batch = nullptr;
    if (fields->type == REDIS_REPLY_ARRAY && fields->elements % 2 == 0 && fields->elements <= 2 * kMaxFields) {
        for (size_t i = 0; i < fields->elements; i += 2) {
            const redisReply *f = fields->element[i], *v = fields->element[i + 1];
            if (!is_text(f) || !is_text(v)) continue;
            if (text_of(f) == "e") edge = v;
            if (text_of(f) == "q") batch = v;
        }
    }
    if (!edge || !batch || !is_edge_hex(text_of(edge))) {
        metrics_.add_quota_redis_skipped(1);
        return;
    }
    const std::string edge_hex(text_of(edge));
    if (edge_hex == own) return;  // this edge's own (counted as its own use already)
    std::vector<QuotaRecord> records;
    size_t skipped = 0;
    if (!decode_quota_batch(text_of(batch), records, skipped)) {
        metrics_.add_quota_redis_skipped(1);
        return;
    }
    if (skipped) metrics_.add_quota_redis_skipped(skipped);
    size_t dropped = 0;
    for (const QuotaRecord &rec : records) {
        const std::string k = subject_key(rec.subject, rec.id.data(), rec.tag);
        auto s = heard_.find(k);
        if (s == heard_.end()) {
            if (heard_.size() >= kMaxSubjects) {
                dropped++;
                continue;
            }
            s = heard_.emplace(k, Heard{}).first;
        }
        auto it = s->second.find(edge_hex);
        if (it == s->second.end()) {
            if (s->second.size() >= kMaxEdges) {
                dropped++;
                continue;
            }
            s->second.emplace(edge_hex, std::make_pair(rec.tag, rec.units));
        } else if (rec.tag >= it->second.first) {
            // the stream is in order: the edge's latest value of a period
            // replaces the one before (a refund lowers it); a newer period's
            // replaces an older one's, an older period's never comes back
            it->second = {rec.tag, rec.units};
        }
    }
    if (dropped) metrics_.add_quota_redis_dropped(dropped);
}

// Forgets periods that are over; sums each subject's current period of a
// class over the other edges (two tags of one class, a clock stepping across
// a boundary: the greater tag's).
void QuotaRedis::prune_and_sum(int64_t now_ms) {
    QuotaExchange::Sums sums;
    for (auto s = heard_.begin(); s != heard_.end();) {
        auto &edges = s->second;
        for (auto it = edges.begin(); it != edges.end();) {
            it = quota_tag_current(it->second.first, now_ms) ? std::next(it) : edges.erase(it);
        }
        if (edges.empty()) {
            s = heard_.erase(s);
            continue;
        }
        std::pair<uint16_t, uint64_t> sum{0, 0};
        for (const auto &[edge, use] : edges) {
            if (use.first < sum.first) continue;
            if (use.first > sum.first) sum = {use.first, 0};
            sum.second = saturating_add(sum.second, use.second);
        }
        if (sum.second > 0) sums.emplace(s->first, sum);
        ++s;
    }
    std::lock_guard<std::mutex> lock(sums_mu_);
    sums_ = std::move(sums);
}

QuotaExchange::Sums QuotaRedis::sums() const {
    std::lock_guard<std::mutex> lock(sums_mu_);
    return sums_;
}

void QuotaRedis::run() {
    loop_.run(options_.interval, [this](int64_t now_ms) { exchange_once(now_ms); });
}

void QuotaRedis::stop() { loop_.stop(); }

}  // namespace keyauth::syncd
