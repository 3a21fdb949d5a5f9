// JSON shapes of accounts and keys, shared by keyauthctl --json and keyauthd
// so that the console API and the operator CLI never drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "records.h"
#include "rfc3339.h"
#include "usage_record.h"
#include "store.h"

namespace keyauth {

// "active", "revoked" or "expired" (revoked first, whatever else it is).
const char *key_status(const KeyRecord &key, int64_t now_ms);

// Key object (DESIGN.md): id, name, prefix, scopes, rateLimitPerMinute
// (effective: capped at the account entitlement), requestedRateLimitPerMinute,
// status at now_ms, createdAt, revokedAt, expiresAt, rolledFrom, rolledTo;
// lastUsedAt and usage are null here (the console fills them in). Never the
// secret or its hash.
nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm, int64_t now_ms);
// Fills in usage {allowed, rateLimited} and lastUsedAt (null if never used).
void set_usage(nlohmann::json &key, const UsageTotals &usage);

nlohmann::json account_to_json(const Account &account);

}  // namespace keyauth
