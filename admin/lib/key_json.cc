#include "key_json.h"

#include <algorithm>

#include "key_rules.h"

namespace keyauth {

namespace {

nlohmann::json time_or_null(int64_t ms) {
    return ms ? nlohmann::json(format_time(ms)) : nlohmann::json(nullptr);
}

nlohmann::json key_id_or_null(const Id &id) {
    return is_none(id) ? nlohmann::json(nullptr) : nlohmann::json(id_to_string(kKeyIdPrefix, id));
}

}  // namespace

void set_usage(nlohmann::json &key, const UsageTotals &usage) {
    key["usage"] = {{"allowed", usage.allowed}, {"rateLimited", usage.rate_limited}};
    key["lastUsedAt"] = time_or_null(usage.last_used_ms);
}

const char *key_status(const KeyRecord &key, int64_t now_ms) {
    if (key.status == KA_KEY_REVOKED) return "revoked";
    return key_active(key, now_ms) ? "active" : "expired";
}

nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm, int64_t now_ms) {
    return {
        {"id", id_to_string(kKeyIdPrefix, key.key_id)},
        {"name", key.name},
        {"prefix", key.prefix},
        {"scopes", key.scopes},
        {"rateLimitPerMinute", std::min(key.requested_rpm, entitlement_rpm)},
        {"requestedRateLimitPerMinute", key.requested_rpm},
        {"status", key_status(key, now_ms)},
        {"createdAt", format_time(key.created_ms)},
        {"revokedAt", time_or_null(key.revoked_ms)},
        {"expiresAt", time_or_null(key.expires_ms)},
        {"rolledFrom", key_id_or_null(key.rolled_from)},
        {"rolledTo", key_id_or_null(key.rolled_to)},
        {"lastUsedAt", nullptr},
        {"usage", {{"allowed", 0}, {"rateLimited", 0}}},
    };
}

nlohmann::json account_to_json(const Account &account) {
    return {
        {"id", id_to_string(kAccountIdPrefix, account.id)},
        {"name", account.record.name},
        {"entitlementPerMinute", account.record.entitlement_rpm},
        {"status", account.record.status == KA_ACCOUNT_ACTIVE ? "active" : "suspended"},
        {"createdAt", format_time(account.record.created_ms)},
        {"maxKeys", account.record.max_keys},
        {"allowedScopes", account.record.allowed_scopes.empty()
                              ? nlohmann::json(nullptr)
                              : nlohmann::json(account.record.allowed_scopes)},
    };
}

}  // namespace keyauth
