// Where keyauthd and keyauthctl read what a quota has used (issue 28): the
// "used", "remaining" of a key's or an account's quota. Beside
// usage_source.h (lifetime totals); this is the current period's count.
//   - single host: the edge's quota ledger, "<usage dir>/quota.ledger"
//     (the usage dir: keyauth_usage_db, --usage-db)
//     (src/core/quota_ledger.h), mapped read-only once it exists;
//   - many edges: the sum of what every edge's keyauth-syncd published of
//     the subject's use in the period ("<prefix>/quota/...", quota_keyspace.h).
// A subject with nothing recorded (or no ledger yet) has used 0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "etcd_client.h"
#include "etcd_keyspace.h"
#include "ids.h"
#include "quota_ledger.h"
#include "records.h"

namespace keyauth {

class QuotaUsageSource {
public:
    virtual ~QuotaUsageSource() = default;
    // Units `id` used in the period of kind `period` holding now_ms. The
    // etcd source throws StoreError (kUnavailable) when etcd cannot be read.
    virtual uint64_t used(QuotaSubject subject, const Id &id, uint8_t period, int64_t now_ms) = 0;
};

// The id a key's quota is counted under at the edge: its rate id (the
// first key of its roll chain), so a successor shares its chain's use.
inline const Id &quota_subject_id(const KeyRecord &key) { return is_none(key.rate_id) ? key.key_id : key.rate_id; }

// The ledger at `ledger_path`, opened read-only on first use (retried
// while it does not exist).
std::unique_ptr<QuotaUsageSource> make_ledger_quota_usage(std::string ledger_path);

// Every edge's use, summed from etcd under `prefix`: one range read a call.
std::unique_ptr<QuotaUsageSource> make_etcd_quota_usage(etcd::ClientOptions options, std::string prefix);

// What keyauthd and keyauthctl wire in: the ledger in the usage store's
// directory `usage_dir` (default_usage_dir of the store by default), or with
// etcd endpoints the many-edge source.
std::unique_ptr<QuotaUsageSource> make_quota_usage_source(
    const std::string &usage_dir, const etcd::ClientOptions &etcd,
    const std::string &etcd_prefix = std::string(kDefaultEtcdPrefix));

}  // namespace keyauth
