// JSON shapes of accounts and keys, shared by keyauthctl --json and keyauthd
// so that the console API and the operator CLI never drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "records.h"
#include "rfc3339.h"
#include "usage_record.h"
#include "quota_json.h"
#include "store.h"

namespace keyauth {

// "active", "revoked" or "expired" (revoked first, whatever else it is).
const char *key_status(const KeyRecord &key, int64_t now_ms);

// Key object (DESIGN.md): id, name, prefix, scopes, rateLimitPerMinute
// (effective: capped at the account's effective entitlement, its own or
// its plan's), requestedRateLimitPerMinute, status at now_ms, createdAt,
// revokedAt, expiresAt, rolledFrom, rolledTo, quota (null, or with
// quota_used: what the key's roll chain used this period, quota_usage.h),
// quotaManaged (an operator set the quota: the console may only lower it);
// lastUsedAt and usage are null here (the console fills them in), and
// leak (set_leak). Never the secret or its hash.
nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm, int64_t now_ms,
                           std::optional<uint64_t> quota_used = 0);
// Fills in leak: the key's report (leak_records.h: {source, url,
// reportedAt, revoked}) when it was reported as leaked, else null.
void set_leak(nlohmann::json &key, const std::map<Id, KeyLeak> &leaks, const Id &key_id);
// Fills in usage {allowed, rateLimited} and lastUsedAt (null if never used).
void set_usage(nlohmann::json &key, const UsageTotals &usage);

// The account as GET /v1/account and keyauthctl show it (issue 28): id,
// name, status, planId, the effective rateLimitPerMinute and maxKeys,
// allowedScopes, the effective quota (with quota_used: the account's use
// this period), overrides (which of rateLimitPerMinute, maxKeys, quota are
// the account's own rather than its plan's), entitlementPerMinute (its
// own rate) and createdAt.
nlohmann::json account_to_json(const AccountOnPlan &account, std::optional<uint64_t> quota_used, int64_t now_ms);

}  // namespace keyauth
