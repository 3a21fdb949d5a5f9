#include "key_json.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace keyauth {

std::string format_time(int64_t ms) {
    time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             static_cast<int>(ms % 1000));
    return buf;
}

nlohmann::json key_to_json(const KeyRecord &key, uint32_t entitlement_rpm) {
    return {
        {"id", id_to_string(kKeyIdPrefix, key.key_id)},
        {"name", key.name},
        {"prefix", key.prefix},
        {"scopes", key.scopes},
        {"rateLimitPerMinute", std::min(key.requested_rpm, entitlement_rpm)},
        {"requestedRateLimitPerMinute", key.requested_rpm},
        {"status", key.status == KA_KEY_REVOKED ? "revoked" : "active"},
        {"createdAt", format_time(key.created_ms)},
        {"revokedAt", key.revoked_ms ? nlohmann::json(format_time(key.revoked_ms))
                                     : nlohmann::json(nullptr)},
    };
}

nlohmann::json account_to_json(const Account &account) {
    return {
        {"id", id_to_string(kAccountIdPrefix, account.id)},
        {"name", account.record.name},
        {"entitlementPerMinute", account.record.entitlement_rpm},
        {"status", account.record.status == KA_ACCOUNT_ACTIVE ? "active" : "suspended"},
        {"createdAt", format_time(account.record.created_ms)},
    };
}

}  // namespace keyauth
