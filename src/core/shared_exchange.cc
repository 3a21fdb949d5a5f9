#include "shared_exchange.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "gcra.h"
#include "spent_batch.h"

namespace keyauth {
namespace {

// hiredis's own reply objects within a budget (the reader's privdata): an
// array longer than kMaxElements is refused before anything is allocated for
// it (hiredis 0.14 has no limit of its own: "*2000000000" asks for 16 GB),
// and so is any object past kMaxObjects in one exchange (small objects cost
// hiredis about 30 times their bytes). A refusal reads as hiredis's "out of
// memory"; the budget says what it was.
struct ReplyBudget {
    size_t objects_left;
    const char *refused;
};

using CreateString = void *(*)(const redisReadTask *, char *, size_t);
using CreateArray = void *(*)(const redisReadTask *, int);
using CreateInteger = void *(*)(const redisReadTask *, long long);
using CreateNil = void *(*)(const redisReadTask *);

struct HiredisObjects {
    CreateString string;
    CreateArray array;
    CreateInteger integer;
    CreateNil nil;
};

HiredisObjects &hiredis_objects() {
    static HiredisObjects o{};
    return o;
}

bool spend(const redisReadTask *task) {
    auto *b = static_cast<ReplyBudget *>(task->privdata);
    if (b->objects_left == 0) {
        b->refused = "more objects than an exchange's answer holds";
        return false;
    }
    b->objects_left--;
    return true;
}

redisReplyObjectFunctions *capped_functions() {
    static redisReplyObjectFunctions fns;
    static bool made = false;
    if (!made) {
        redisReader *probe = redisReaderCreate();
        if (probe == nullptr) return nullptr;
        fns = *probe->fn;
        redisReaderFree(probe);
        hiredis_objects() = HiredisObjects{fns.createString, fns.createArray, fns.createInteger,
                                           fns.createNil};
        fns.createString = [](const redisReadTask *t, char *s, size_t n) -> void * {
            return spend(t) ? hiredis_objects().string(t, s, n) : nullptr;
        };
        fns.createArray = [](const redisReadTask *t, int elements) -> void * {
            if (elements > SharedExchange::kMaxElements) {
                static_cast<ReplyBudget *>(t->privdata)->refused =
                    "an array longer than an exchange's answer holds";
                return nullptr;
            }
            return spend(t) ? hiredis_objects().array(t, elements) : nullptr;
        };
        fns.createInteger = [](const redisReadTask *t, long long v) -> void * {
            return spend(t) ? hiredis_objects().integer(t, v) : nullptr;
        };
        fns.createNil = [](const redisReadTask *t) -> void * {
            return spend(t) ? hiredis_objects().nil(t) : nullptr;
        };
        made = true;
    }
    return &fns;
}

std::string_view text_of(const redisReply *r) {
    return std::string_view(r->str, r->len);
}

bool is_text(const redisReply *r) {
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

// "<ms>-<seq>", both decimal; ms out if given.
bool valid_id(std::string_view id, uint64_t *ms = nullptr) {
    if (id.empty() || id.size() > SharedExchange::kMaxIdLen) return false;
    size_t dash = id.find('-');
    if (dash == 0 || dash == std::string_view::npos || dash + 1 == id.size() || dash > 20 ||
        id.size() - dash - 1 > 20) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < id.size(); i++) {
        if (i == dash) continue;
        if (id[i] < '0' || id[i] > '9') return false;
        if (i < dash) v = v * 10 + static_cast<uint64_t>(id[i] - '0');
    }
    if (ms) *ms = v;
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

struct SharedExchange::Budget : ReplyBudget {};

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

    // where reading starts: the newest entry now (the stream may be empty)
    if (last_id_.empty()) add_command({"XREVRANGE", settings_.stream, "+", "-", "COUNT", "1"},
                                      Expect::kLatest);

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
        redisReplyObjectFunctions *fns = capped_functions();
        reader_ = fns ? redisReaderCreateWithFunctions(fns) : nullptr;
        if (reader_ == nullptr) {
            err = "out of memory for the Redis reply parser";
            return Feed::kError;
        }
        budget_->objects_left = kMaxObjects;
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
        case Expect::kAdd:
            ok = take_added(r, err);
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
    if (ok) out.published = drained_;
    clear_replies();
    expected_.clear();
    return ok;
}

bool SharedExchange::take_latest(const redisReply *r, std::string &err) {
    if (r->type == REDIS_REPLY_ERROR) {
        err = redis_error("XREVRANGE", r);
        return false;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements > 1) {
        err = "XREVRANGE: not a Redis answer";
        return false;
    }
    if (r->elements == 0) {
        last_id_ = "0-0";  // an empty stream: read it from its start
        return true;
    }
    const redisReply *entry = r->element[0];
    if (entry->type != REDIS_REPLY_ARRAY || entry->elements != 2 ||
        !is_text(entry->element[0]) || !valid_id(text_of(entry->element[0]))) {
        err = "XREVRANGE: not a stream entry";
        return false;
    }
    last_id_.assign(text_of(entry->element[0]));
    return true;
}

bool SharedExchange::take_added(const redisReply *r, std::string &err) {
    uint64_t ms = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        err = redis_error("XADD", r);
        return false;
    }
    if (!is_text(r) || !valid_id(text_of(r), &ms)) {
        err = "XADD: not a stream entry id";
        return false;
    }
    // Redis's clock, not this host's: the next publish trims what is older
    // than a minute
    trim_before_ms_ = ms > static_cast<uint64_t>(kRetentionMs) ? ms - kRetentionMs : 0;
    return true;
}

bool SharedExchange::take_read(const redisReply *r, RateTable &table, uint64_t now_ns,
                               const RateLock &lock, ExchangeResult &out, std::string &err) {
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
        if (!take_entry(entries->element[i], table, now_ns, lock, out, err)) return false;
    }
    out.more = entries->elements >= kReadCount;
    return true;
}

bool SharedExchange::take_entry(const redisReply *entry, RateTable &table, uint64_t now_ns,
                                const RateLock &lock, ExchangeResult &out, std::string &err) {
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
        if (table.fold(e.id, e.spent, GcraParams::per_minute(e.rate_per_minute), now_ns, lock)) {
            out.folded++;
        } else {
            out.unplaced++;
        }
    });
    if (!valid) out.bad_entries++;
    return true;
}

}  // namespace keyauth
