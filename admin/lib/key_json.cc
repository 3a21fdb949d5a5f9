#include "key_json.h"

#include <algorithm>

#include "key_rules.h"
#include "restrictions.h"

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

nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm, int64_t now_ms,
                           std::optional<uint64_t> quota_used) {
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
        {"quota", quota_to_json(key.quota, quota_used, now_ms)},
        {"quotaManaged", key.quota_managed},
        {"allowedIps", allowed_ips_to_json(key.allowed_ips)},
        {"meta", meta_to_json(key.meta)},
        {"lastUsedAt", nullptr},
        {"usage", {{"allowed", 0}, {"rateLimited", 0}}},
        {"leak", nullptr},
    };
}

void set_leak(nlohmann::json &key, const std::map<Id, KeyLeak> &leaks, const Id &key_id) {
    auto it = leaks.find(key_id);
    key["leak"] = it == leaks.end() ? nlohmann::json(nullptr) : key_leak_to_json(it->second);
}

nlohmann::json account_to_json(const AccountOnPlan &on, std::optional<uint64_t> quota_used, int64_t now_ms) {
    const AccountRecord &rec = on.account.record;
    nlohmann::json overrides = nlohmann::json::array();
    if (rec.overrides & KA_OVERRIDE_RATE) overrides.push_back("rateLimitPerMinute");
    if (rec.overrides & KA_OVERRIDE_MAX_KEYS) overrides.push_back("maxKeys");
    if (rec.overrides & KA_OVERRIDE_QUOTA) overrides.push_back("quota");
    return {
        {"id", id_to_string(kAccountIdPrefix, on.account.id)},
        {"name", rec.name},
        {"status", rec.status == KA_ACCOUNT_ACTIVE ? "active" : "suspended"},
        {"planId", rec.plan_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(rec.plan_id)},
        {"rateLimitPerMinute", on.effective.rate_rpm},
        {"maxKeys", on.effective.max_keys},
        {"allowedScopes", rec.allowed_scopes.empty() ? nlohmann::json(nullptr) : nlohmann::json(rec.allowed_scopes)},
        {"allowedIps", allowed_ips_to_json(rec.allowed_ips)},
        {"meta", meta_to_json(rec.meta)},
        {"quota", quota_to_json(on.effective.quota, quota_used, now_ms)},
        {"overrides", overrides},
        {"entitlementPerMinute", rec.entitlement_rpm},
        {"createdAt", format_time(rec.created_ms)},
    };
}

}  // namespace keyauth
