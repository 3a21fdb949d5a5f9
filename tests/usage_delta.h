// One key's counts as the zone's collector hands them to the usage env: the
// bucket tests write real buckets through UsageEnv::add with it.
#pragma once

#include <cstring>

#include "ids.h"
#include "usage_bucket.h"
#include "usage_table.h"

namespace keyauth::testing {

inline UsageDelta usage_delta(const Id &account, const Id &key, const BucketCounts &c, int64_t last_used_ms) {
    UsageDelta d{};
    std::memcpy(d.account_id, account.data(), KA_ID_LEN);
    std::memcpy(d.key_id, key.data(), KA_ID_LEN);
    d.allowed = c.allowed;
    d.rate_limited = c.rate_limited;
    d.quota_exceeded = c.quota_exceeded;
    d.units = c.units;
    d.last_used_ms = last_used_ms;
    return d;
}

}  // namespace keyauth::testing
