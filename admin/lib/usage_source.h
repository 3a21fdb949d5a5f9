// Where keyauthd reads the usage of keys (usage and lastUsedAt of the key
// object): what the edges collected, at most one collection interval stale
// on one host, plus keyauth-syncd's publishing interval on many edges.
//   - single host: the usage env the edge writes (nginx's keyauth_usage_db,
//     keyauthd's and keyauthctl's --usage-db; beside the store,
//     "<--db>.usage", by default), read-only;
//   - many edges: the sum over every edge's totals in etcd.
// A key nobody has used (or no usage env yet) has zeros and last_used_ms 0
// (lastUsedAt null).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "ids.h"
#include "usage_bucket.h"
#include "usage_record.h"

namespace keyauth {

using KeyUsage = UsageTotals;

// One key's counts in one hour or day, on one edge or summed over several.
struct BucketRow {
    Id account{};
    Id key{};
    uint32_t period = 0;  // period_of(granularity, t): hours or days since the epoch
    BucketCounts counts;
};
using BucketSink = std::function<void(const BucketRow &)>;

class UsageSource {
public:
    virtual ~UsageSource() = default;
    // An entry for every key asked for (keys of `account`). Throws
    // StoreError kUnavailable when the source cannot be read now.
    virtual std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) = 0;

    // Every stored bucket of granularity g with a period in [from, to), of
    // `account` (every account when null) and of `key` (every key of the
    // account when null; a key needs an account). The same (account, key,
    // period) may come more than once (once per edge): the caller adds them
    // up. Buckets nobody wrote are not called (the caller zero-fills). Throws
    // StoreError kUnavailable when the source cannot be read now.
    virtual void buckets(Granularity g, uint32_t from, uint32_t to, const Id *account,
                         const Id *key, const BucketSink &each) = 0;

    // How many days of day buckets the edges keep (keyauth_usage_history,
    // keyauth-syncd --usage-history): what they recorded, else the default.
    // Readers clip to it (kept_buckets, usage_series.h), aged out or not.
    // Throws as buckets() does.
    virtual uint32_t days_kept() { return kDefaultDayBucketsKept; }
};

// Reads PATH (default: the store's path + ".usage") once it exists.
std::unique_ptr<UsageSource> make_lmdb_usage_source(std::string usage_db_path);
// Totals: one range read over "<prefix>/usage/<account hex>" per call.
// Buckets: the time-first "<prefix>/usage_hours|usage_days/<period>/..."
// keys (usage_keyspace.h), one range for the window or one per period.
std::unique_ptr<UsageSource> make_etcd_usage_source(etcd::ClientOptions options, std::string prefix);

// The usage store's default place, as nginx's keyauth_usage_db has it: a
// sibling of the store, `db` + ".usage".
std::string default_usage_dir(const std::string &db);

// What keyauthd and keyauthctl wire in: etcd when endpoints are given, else
// the usage store at `usage_dir`.
std::unique_ptr<UsageSource> make_usage_source(const std::string &usage_dir,
                                               const etcd::ClientOptions &etcd,
                                               const std::string &etcd_prefix);

}  // namespace keyauth
