#include "usage_publisher.h"

#include <lmdb.h>
#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <tuple>
#include <mutex>
#include <vector>

#include "etcd_codec.h"
#include "ids.h"
#include "syncd_log.h"
#include "usage_keyspace.h"

namespace keyauth::syncd {
namespace {

// etcd refuses more operations per txn (--max-txn-ops).
constexpr size_t kPutsPerTxn = 128;

// One table's buckets as read: LMDB bucket key -> counts, from a period
// on; `stopped_at`: the first period not read (a backlog cut at the end of
// a period), or none.
struct BucketsRead {
    std::map<std::string, BucketCounts> buckets;
    bool cut = false;
    uint32_t stopped_at = 0;
};

struct EdgeUsage {
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
    std::map<std::string, UsageTotals> totals;  // account id ++ key id
    BucketsRead hours, days;
};

// The buckets of `table` from period `from` on, at most about `limit`
// (whole periods: a period begun is read to its end). A table that does
// not exist (an env of a module from before the buckets) reads as empty.
int read_buckets(MDB_txn *txn, const char *table, uint32_t from, size_t limit, BucketsRead &out) {
    MDB_dbi dbi = 0;
    int rc = mdb_dbi_open(txn, table, 0, &dbi);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc != 0) return rc;
    MDB_cursor *cur = nullptr;
    rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc != 0) return rc;
    unsigned char seek[4];
    encode_bucket_period(from, seek);
    MDB_val k{sizeof(seek), seek}, v{};
    uint32_t last = from;
    size_t n = 0;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const std::string_view kb(static_cast<const char *>(k.mv_data), k.mv_size);
        uint32_t period = 0;
        Id account, key;
        BucketCounts c;
        if (!decode_bucket_key(kb, period, account.data(), key.data()) ||
            !decode_bucket({static_cast<const char *>(v.mv_data), v.mv_size}, c)) {
            continue;  // a layout this build does not know: not ours to publish
        }
        if (n >= limit && period != last) {
            out.cut = true;
            out.stopped_at = period;
            break;
        }
        last = period;
        out.buckets.emplace(std::string(kb), c);
        n++;
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

// LMDB must not have one environment open twice in a process (closing
// either drops the other's locks): the publisher's and the quota exchange's
// reads of the usage env take turns.
std::mutex usage_env_mu;

// Opens the usage env read-only, runs `fn` in a read transaction with the
// edge id (and the usage database), and closes it. MDB_NOTFOUND: no edge id
// yet (made by nginx, not written yet).
template <class Fn>
int with_usage_env(const std::string &path, unsigned char edge_id[KA_USAGE_EDGE_ID_LEN], Fn &&fn) {
    std::lock_guard<std::mutex> lock(usage_env_mu);
    MDB_env *env = nullptr;
    int rc = mdb_env_create(&env);
    if (rc == 0) {
        mdb_env_set_maxdbs(env, KA_USAGE_DB_COUNT);
        rc = mdb_env_open(env, path.c_str(), MDB_RDONLY | MDB_NOTLS, 0);
    }
    MDB_txn *txn = nullptr;
    MDB_dbi meta = 0, usage = 0;
    if (rc == 0) rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
    if (rc == 0) rc = mdb_dbi_open(txn, KA_USAGE_DB_META, 0, &meta);
    if (rc == 0) rc = mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &usage);
    MDB_val k{sizeof(KA_USAGE_META_EDGE_ID) - 1, const_cast<char *>(KA_USAGE_META_EDGE_ID)}, v{};
    if (rc == 0) rc = mdb_get(txn, meta, &k, &v);
    if (rc == 0 && v.mv_size != KA_USAGE_EDGE_ID_LEN) rc = MDB_CORRUPTED;
    if (rc == 0) std::memcpy(edge_id, v.mv_data, KA_USAGE_EDGE_ID_LEN);
    if (rc == 0) rc = fn(txn, usage);
    if (txn != nullptr) mdb_txn_abort(txn);
    if (env != nullptr) mdb_env_close(env);
    return rc;
}

// The usage env as it is now; false with a reason if it cannot be read.
// An env without an edge id yet reads as empty.
bool read_edge_usage(const std::string &path, uint32_t hours_from, uint32_t days_from, size_t limit,
                     EdgeUsage &out, std::string &error) {
    const int rc = with_usage_env(path, out.edge_id, [&](MDB_txn *txn, MDB_dbi usage) {
        MDB_cursor *cur = nullptr;
        int rc = mdb_cursor_open(txn, usage, &cur);
        if (rc != 0) return rc;
        MDB_val k{}, v{};
        for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            UsageTotals t;
            if (k.mv_size != KA_USAGE_KEY_LEN ||
                !decode_usage_record({static_cast<const char *>(v.mv_data), v.mv_size}, t)) {
                continue;  // a layout this build does not know: not ours to publish
            }
            out.totals[std::string(static_cast<const char *>(k.mv_data), k.mv_size)] = t;
        }
        mdb_cursor_close(cur);
        if (rc != MDB_NOTFOUND) return rc;
        rc = read_buckets(txn, KA_USAGE_DB_HOURS, hours_from, limit, out.hours);
        if (rc == 0) rc = read_buckets(txn, KA_USAGE_DB_DAYS, days_from, limit, out.days);
        return rc;
    });
    if (rc == MDB_NOTFOUND) {  // made by nginx, not written yet
        out.totals.clear();
        out.hours = BucketsRead();
        out.days = BucketsRead();
        return true;
    }
    if (rc != 0) error = "usage env \"" + path + "\": " + mdb_strerror(rc);
    return rc == 0;
}

}  // namespace

bool read_usage_edge_id(const std::string &usage_db, unsigned char edge_id[KA_USAGE_EDGE_ID_LEN],
                        std::string &error) {
    struct stat st;
    if (::stat((usage_db + "/data.mdb").c_str(), &st) != 0) return false;  // no usage env yet
    const int rc = with_usage_env(usage_db, edge_id, [](MDB_txn *, MDB_dbi) { return 0; });
    if (rc != 0 && rc != MDB_NOTFOUND) error = "usage env \"" + usage_db + "\": " + mdb_strerror(rc);
    return rc == 0;
}

std::unique_ptr<UsagePublisher> UsagePublisher::make(UsagePublisherOptions options, Metrics &metrics,
                                                     std::string &error) {
    auto client = etcd::Client::make(options.etcd, error);
    if (!client) return nullptr;
    return std::unique_ptr<UsagePublisher>(new UsagePublisher(std::move(options), metrics, std::move(client)));
}

UsagePublisher::UsagePublisher(UsagePublisherOptions options, Metrics &metrics,
                               std::unique_ptr<etcd::Client> client)
    : options_(std::move(options)), metrics_(metrics), client_(std::move(client)) {}

// One put of a round and what etcd holds once it is done.
struct UsagePublisher::Put {
    std::string etcd_key, value;
    std::function<void()> done;
    bool bucket = false;
};

int64_t UsagePublisher::now_ms() const {
    if (options_.now_ms) return options_.now_ms();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool UsagePublisher::age_out(uint32_t hour, uint32_t day) {
    if (aged_out_ && aged_out_hour_ == hour) return true;
    const uint32_t hours_cut = hour >= kHourBucketsKept ? hour - kHourBucketsKept + 1 : 0;
    const uint32_t days_cut = day >= options_.history_days ? day - options_.history_days + 1 : 0;
    etcd::TxnRequest txn;
    for (auto [g, cut] : {std::pair{Granularity::kHour, hours_cut}, std::pair{Granularity::kDay, days_cut}}) {
        txn.success.emplace_back(etcd::DeleteRangeRequest{etcd_usage_bucket_prefix(options_.prefix, g),
                                                          etcd_usage_period_prefix(options_.prefix, g, cut)});
    }
    // what etcd keeps, for keyauthd to clip its reads to between age-outs
    txn.success.emplace_back(etcd::PutRequest{etcd_usage_history_key(options_.prefix),
                                              encode_usage_history(options_.history_days)});
    etcd::TxnResponse answer;
    const etcd::Status s = client_->txn(txn, answer);
    if (!s.ok()) {
        log_event("usage age-out failed", {{"error", std::string(etcd::errc_name(s.code)) + ": " + s.message}});
        return false;
    }
    int64_t deleted = 0;
    for (const etcd::ResponseOp &op : answer.responses) {
        if (auto *d = std::get_if<etcd::DeleteRangeResponse>(&op)) deleted += d->deleted;
    }
    if (deleted > 0) {
        log_event("usage buckets aged out", {{"deleted", deleted},
                                             {"hoursBefore", etcd_usage_period_text(Granularity::kHour, hours_cut)},
                                             {"daysBefore", etcd_usage_period_text(Granularity::kDay, days_cut)}});
    }
    aged_out_ = true;
    aged_out_hour_ = hour;
    return true;
}

bool UsagePublisher::load_mark(const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]) {
    if (edge_known_ && std::memcmp(edge_id, edge_id_, KA_USAGE_EDGE_ID_LEN) == 0) return true;
    // a new edge id (a new env): nothing of the old one's state applies
    etcd::RangeRequest r;
    r.key = etcd_usage_mark_key(options_.prefix, edge_id);
    etcd::RangeResponse answer;
    const etcd::Status s = client_->range(r, answer);
    if (!s.ok()) {
        log_event("usage publish failed", {{"error", std::string(etcd::errc_name(s.code)) + ": " + s.message}});
        return false;
    }
    published_.clear();
    hours_.published.clear();
    days_.published.clear();
    hours_.from = days_.from = 0;  // no mark: everything the edge holds
    mark_in_etcd_.clear();
    if (!answer.kvs.empty()) {
        uint32_t h = 0, d = 0;
        if (decode_usage_mark(answer.kvs[0].value, h, d)) {
            hours_.from = h;
            days_.from = d;
        }
        mark_in_etcd_ = answer.kvs[0].value;
    }
    std::memcpy(edge_id_, edge_id, KA_USAGE_EDGE_ID_LEN);
    edge_known_ = true;
    return true;
}

bool UsagePublisher::put_all(std::vector<Put> &puts) {
    for (size_t i = 0; i < puts.size(); i += kPutsPerTxn) {
        etcd::TxnRequest txn;
        const size_t end = std::min(puts.size(), i + kPutsPerTxn);
        for (size_t j = i; j < end; j++) txn.success.emplace_back(etcd::PutRequest{puts[j].etcd_key, puts[j].value});
        etcd::TxnResponse answer;
        etcd::Status s = client_->txn(txn, answer);
        if (!s.ok()) {
            // what was not published stays changed: the next round sends it
                log_event("usage publish failed",
                      {{"error", std::string(etcd::errc_name(s.code)) + ": " + s.message},
                       {"unpublished", puts.size() - i}});
            return false;
        }
        size_t buckets = 0;
        for (size_t j = i; j < end; j++) {
            puts[j].done();
            buckets += puts[j].bucket;
        }
        metrics_.add_usage_published(end - i - buckets);
        metrics_.add_usage_buckets_published(buckets);
    }
    return true;
}

bool UsagePublisher::publish_once() {
    const bool ok = publish_round();
    if (!ok) metrics_.add_usage_publish_error();
    return ok;
}

bool UsagePublisher::publish_round() {
    const int64_t now_ms = this->now_ms();
    const uint32_t hour = period_of(Granularity::kHour, now_ms), day = period_of(Granularity::kDay, now_ms);
    // etcd refusing one call refuses the next: the round ends at the first
    if (!age_out(hour, day)) return false;
    struct stat st;
    if (::stat((options_.usage_db + "/data.mdb").c_str(), &st) != 0) return true;  // no usage yet
    std::string error;
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN];
    if (!read_usage_edge_id(options_.usage_db, edge_id, error)) {
        if (error.empty()) return true;  // made by nginx, not written yet
        log_event("usage publish failed", {{"error", error}});
        return false;
    }
    if (!load_mark(edge_id)) return false;

    // Where this round reads from: the watermark, never before what etcd
    // keeps, and always the previous period on (it may still grow).
    auto read_from = [](uint32_t mark, uint32_t now, uint32_t kept) {
        const uint32_t cut = now >= kept ? now - kept + 1 : 0;
        return std::min(std::max(mark, cut), now > 0 ? now - 1 : 0);
    };
    const uint32_t hours_from = read_from(hours_.from, hour, kHourBucketsKept);
    const uint32_t days_from = read_from(days_.from, day, options_.history_days);
    EdgeUsage now;
    if (!read_edge_usage(options_.usage_db, hours_from, days_from, options_.buckets_per_round, now, error)) {
        log_event("usage publish failed", {{"error", error}});
        return false;
    }
    if (std::memcmp(now.edge_id, edge_id_, KA_USAGE_EDGE_ID_LEN) != 0) {
        edge_known_ = false;  // the env was replaced meanwhile: start over next round
        return true;
    }

    std::vector<Put> puts;
    for (const auto &[key, totals] : now.totals) {
        auto it = published_.find(key);
        if (it != published_.end() && it->second == totals) continue;
        Id account, id;
        std::memcpy(account.data(), key.data(), KA_ID_LEN);
        std::memcpy(id.data(), key.data() + KA_ID_LEN, KA_ID_LEN);
        unsigned char rec[KA_USAGE_RECORD_SIZE];
        encode_usage_record(totals, rec);
        puts.push_back({etcd_usage_key(options_.prefix, account, id, now.edge_id),
                        std::string(reinterpret_cast<char *>(rec), sizeof(rec)),
                        [this, &key = key, &totals = totals] { published_[key] = totals; }, false});
    }
    for (auto [table, read] : {std::pair{&days_, &now.days}, std::pair{&hours_, &now.hours}}) {
        for (const auto &[key, counts] : read->buckets) {
            auto it = table->published.find(key);
            if (it != table->published.end() && it->second == counts) continue;
            uint32_t period = 0;
            Id account, id;
            decode_bucket_key(key, period, account.data(), id.data());
            if (period > etcd_usage_last_period(table->g)) continue;  // a clock past 9999: no key for it
            unsigned char rec[KA_USAGE_BUCKET_SIZE];
            encode_bucket(counts, rec);
            puts.push_back({etcd_usage_bucket_key(options_.prefix, table->g, period, account, id, now.edge_id),
                            std::string(reinterpret_cast<char *>(rec), sizeof(rec)),
                            [table = table, &key = key, &counts = counts] { table->published[key] = counts; },
                            true});
        }
    }
    if (!put_all(puts)) return false;

    // Everything read is in etcd: the next round reads from the previous
    // period on (or where a backlog was cut), and forgets what is older.
    for (auto [table, read, from, current] : {std::tuple{&days_, &now.days, days_from, day},
                                              std::tuple{&hours_, &now.hours, hours_from, hour}}) {
        uint32_t next = std::max(from, current > 0 ? current - 1 : 0);
        if (read->cut) next = std::max(from, std::min(next, read->stopped_at));
        table->from = next;
        unsigned char first[4];
        encode_bucket_period(next, first);
        table->published.erase(table->published.begin(),
                               table->published.lower_bound(std::string(reinterpret_cast<char *>(first), 4)));
    }
    const std::string mark = encode_usage_mark(hours_.from, days_.from);
    if (mark != mark_in_etcd_) {
        etcd::PutResponse answer;
        const etcd::Status s =
            client_->put(etcd::PutRequest{etcd_usage_mark_key(options_.prefix, edge_id_), mark}, answer);
        if (!s.ok()) {
            log_event("usage publish failed",
                      {{"error", std::string(etcd::errc_name(s.code)) + ": " + s.message}, {"mark", mark}});
            return false;
        }
        mark_in_etcd_ = mark;
    }
    return true;
}

void UsagePublisher::run() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait_for(lock, options_.interval, [this] { return stop_; });
            if (stop_) break;
        }
        try {
            publish_once();
        } catch (const std::exception &e) {  // bad_alloc: the next round may do better
            metrics_.add_usage_publish_error();
            log_event("usage publish failed", {{"error", e.what()}});
        }
    }
}

void UsagePublisher::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    client_->cancel();
}

}  // namespace keyauth::syncd
