// The usage of keys on many edges: every edge's keyauth-syncd publishes its
// cumulative totals under "<prefix>/usage/<account><key>/<edge>" and its
// hour and day buckets under "<prefix>/usage_hours|usage_days/<period>/
// <account><key>/<edge>" (usage_keyspace.h); the sum over the edges is the
// key's usage. Totals: one range read per call. Buckets: one range
// [from, to), or one small range per period for one account, whichever
// takes fewer requests.
#include <mutex>

#include "etcd_codec.h"
#include "etcd_prefix_reader.h"
#include "store_error.h"
#include "usage_keyspace.h"
#include "usage_source.h"

namespace keyauth {
namespace {

// An account's keys times the edges (totals), or the buckets one call
// reads (every edge's record counts); beyond this the read is refused
// rather than grow without bound.
constexpr int64_t kMaxRecords = 1'000'000;
// Keys a page of a bucket range: about 300 bytes each in the answer.
constexpr int64_t kBucketPage = 5'000;

[[noreturn]] void unavailable(const std::string &why) {
    throw StoreError(StoreError::Kind::kUnavailable, "", why);
}

[[noreturn]] void too_many(Granularity g, uint32_t from, uint32_t to) {
    unavailable("more than " + std::to_string(kMaxRecords) + " usage " +
                (g == Granularity::kHour ? "hour" : "day") + " buckets in " + etcd_usage_period_text(g, from) +
                " to " + etcd_usage_period_text(g, to) + ": ask for fewer periods, or one account");
}

class EtcdUsageSource final : public UsageSource {
public:
    EtcdUsageSource(etcd::ClientOptions options, std::string prefix)
        : reader_(options), options_(std::move(options)), prefix_(std::move(prefix)) {}

    std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) override {
        std::map<Id, KeyUsage> out;
        for (const Id &k : keys) out[k];
        const std::string within = etcd_usage_account_prefix(prefix_, account);
        for (const etcd::KeyValue &kv : reader_.read(within, kMaxRecords)) {
            Id key;
            KeyUsage u;
            if (!parse_etcd_usage_key(within, kv.key, key) || !decode_usage_record(kv.value, u)) continue;
            auto it = out.find(key);
            if (it != out.end()) it->second.add(u);
        }
        return out;
    }

    // Every edge's record is one call of `each`. All accounts: one paged
    // range [from, to) at one revision. One account: a count of that range
    // (no values), then the range itself when it is no more pages than the
    // periods asked, else one range per period over "<period>/<account>"
    // (or "...<account><key>/"), which never reads another account's: a
    // 30-day chart is at most 1 + 30 small requests however big the fleet.
    // Per period, each range is its own snapshot; every record is an edge's
    // cumulative count, so a read racing a publication sees each record
    // before or after it, never a part.
    void buckets(Granularity g, uint32_t from, uint32_t to, const Id *account, const Id *key,
                 const BucketSink &each) override {
        const uint32_t last = etcd_usage_last_period(g);
        if (to > last + 1) to = last + 1;
        if (from >= to) return;
        if (key != nullptr && account == nullptr) return;  // a key needs its account
        const std::string table = etcd_usage_bucket_prefix(prefix_, g);
        int64_t records = 0;
        auto emit = [&](const etcd::KeyValue &kv) {
            UsageBucketName name;
            BucketRow row;
            if (!parse_etcd_usage_bucket_key(table, g, kv.key, name) || name.period < from ||
                name.period >= to || (account != nullptr && name.account != *account) ||
                (key != nullptr && name.key != *key) || !decode_bucket(kv.value, row.counts)) {
                return;  // another account's, or a layout this build does not know
            }
            if (++records > kMaxRecords) too_many(g, from, to);
            row.account = name.account;
            row.key = name.key;
            row.period = name.period;
            each(row);
        };

        etcd::RangeRequest whole;
        whole.key = etcd_usage_period_prefix(prefix_, g, from);
        whole.range_end = etcd_usage_period_prefix(prefix_, g, to);
        if (account != nullptr) {
            // how many pages the whole window is (a count: no values read)
            etcd::RangeRequest count = whole;
            count.count_only = true;
            const int64_t pages = (range_count(count) + kBucketPage - 1) / kBucketPage;
            const bool per_period = pages > static_cast<int64_t>(to) - from;
            if (per_period) {
                for (uint32_t p = from; p < to; p++) {
                    etcd::RangeRequest r;
                    r.key = key != nullptr ? etcd_usage_bucket_key_prefix(prefix_, g, p, *account, *key)
                                           : etcd_usage_bucket_account_prefix(prefix_, g, p, *account);
                    r.range_end = etcd::prefix_range_end(r.key);
                    range_all(r, [&](const etcd::RangeResponse &page, bool) {
                        for (const etcd::KeyValue &kv : page.kvs) emit(kv);
                        return true;
                    });
                }
                return;
            }
        }
        range_all(whole, [&](const etcd::RangeResponse &page, bool first) {
            if (first && account == nullptr && page.count > kMaxRecords) too_many(g, from, to);
            for (const etcd::KeyValue &kv : page.kvs) emit(kv);
            return true;
        });
    }

    // "<prefix>/usage_history", put by every edge's syncd with its age-out.
    uint32_t days_kept() override {
        std::lock_guard<std::mutex> lock(mu_);
        etcd::RangeRequest r;
        r.key = etcd_usage_history_key(prefix_);
        etcd::RangeResponse answer;
        const etcd::Status st = client().range(r, answer);
        if (!st.ok()) {
            unavailable(std::string("etcd read of the usage history failed (") + etcd::errc_name(st.code) +
                        "): " + st.message);
        }
        uint32_t days = 0;
        if (answer.kvs.empty() || !decode_usage_history(answer.kvs[0].value, days)) return kDefaultDayBucketsKept;
        return days;
    }

private:
    etcd::Client &client() {
        if (!client_) {
            std::string error;
            client_ = etcd::Client::make(options_, error);
            if (!client_) unavailable("etcd client: " + error);
        }
        return *client_;
    }

    int64_t range_count(const etcd::RangeRequest &r) {
        std::lock_guard<std::mutex> lock(mu_);
        etcd::RangeResponse answer;
        const etcd::Status st = client().range(r, answer);
        if (!st.ok()) {
            unavailable(std::string("etcd count of usage buckets failed (") + etcd::errc_name(st.code) +
                        "): " + st.message);
        }
        return answer.count;
    }

    // Pages of kBucketPage keys at one revision; `on_page(page, first)`
    // returns false to stop. Any failure is StoreError kUnavailable.
    template <class Fn>
    void range_all(const etcd::RangeRequest &r, Fn &&on_page) {
        std::lock_guard<std::mutex> lock(mu_);
        bool first = true;
        const etcd::Status st = client().range_all(r, kBucketPage, [&](const etcd::RangeResponse &page) {
            const bool was_first = first;
            first = false;
            return on_page(page, was_first);
        });
        if (!st.ok()) {
            unavailable(std::string("etcd range of usage buckets failed (") + etcd::errc_name(st.code) +
                        "): " + st.message);
        }
    }

    EtcdPrefixReader reader_;  // usage is read once per list
    etcd::ClientOptions options_;
    std::mutex mu_;  // one bucket read at a time on client_
    std::unique_ptr<etcd::Client> client_;
    std::string prefix_;
};

}  // namespace

std::unique_ptr<UsageSource> make_etcd_usage_source(etcd::ClientOptions options, std::string prefix) {
    return std::make_unique<EtcdUsageSource>(std::move(options), std::move(prefix));
}

}  // namespace keyauth
