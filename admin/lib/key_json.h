// JSON shapes of accounts and keys, shared by keyauthctl --json and keyauthd
// so that the console API and the operator CLI never drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "records.h"
#include "store.h"

namespace keyauth {

// RFC 3339 UTC with milliseconds: 2026-11-21T23:59:01.123Z
std::string format_time(int64_t ms);

// Key object: id, name, prefix, scopes, rateLimitPerMinute (effective:
// capped at the account entitlement), requestedRateLimitPerMinute, status,
// createdAt, revokedAt. Never the secret or its hash.
nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm);

nlohmann::json account_to_json(const Account &account);

}  // namespace keyauth
