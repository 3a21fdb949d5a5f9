#include "admin_tokens.h"

#include "rfc3339.h"

namespace keyauth {
namespace {

constexpr uint16_t kAdminTokenVersion = 1;

struct Named {
    uint32_t scope;
    const char *name;
};
constexpr Named kScopes[] = {
    {kScopeAccountsRead, "accounts:read"}, {kScopeAccountsWrite, "accounts:write"},
    {kScopeAccountsPlan, "accounts:plan"}, {kScopeKeysRead, "keys:read"},
    {kScopeKeysWrite, "keys:write"},       {kScopeSessionsWrite, "sessions:write"},
    {kScopeUsageRead, "usage:read"},       {kScopeAuditRead, "audit:read"},
    {kScopePlansWrite, "plans:write"},     {kScopeFxWrite, "fx:write"},
    {kScopeWebhooksWrite, "webhooks:write"}, {kAllAdminScopes, "*"},
};

nlohmann::json time_or_null(const std::optional<int64_t> &ms) {
    return ms ? nlohmann::json(format_time(*ms)) : nlohmann::json(nullptr);
}

}  // namespace

const char *admin_scope_name(uint32_t scope) noexcept {
    for (const Named &n : kScopes) {
        if (n.scope == scope) return n.name;
    }
    return nullptr;
}

uint32_t admin_scope_named(std::string_view name) noexcept {
    for (const Named &n : kScopes) {
        if (name == n.name) return n.scope;
    }
    return 0;
}

std::vector<std::string> admin_scope_names() {
    std::vector<std::string> out;
    for (const Named &n : kScopes) out.emplace_back(n.name);
    return out;
}

std::vector<std::string> admin_scope_list(uint32_t scopes) {
    std::vector<std::string> out;
    for (const Named &n : kScopes) {
        if (scopes & n.scope) out.emplace_back(n.name);
    }
    return out;
}

std::string encode_admin_token(const AdminToken &t) {
    nlohmann::json j = {{"id", id_to_string(kAdminTokenIdPrefix, t.id)},
                        {"name", t.name},
                        {"scopes", admin_scope_list(t.scopes)},
                        {"createdMs", t.created_ms},
                        {"expiresMs", t.expires_ms ? nlohmann::json(*t.expires_ms) : nlohmann::json(nullptr)},
                        {"revokedMs", t.revoked_ms ? nlohmann::json(*t.revoked_ms) : nlohmann::json(nullptr)}};
    std::string out(4, '\0');
    out[0] = static_cast<char>(kAdminTokenVersion & 0xff);
    out[1] = static_cast<char>(kAdminTokenVersion >> 8);
    out += j.dump();
    return out;
}

std::optional<AdminToken> decode_admin_token(std::string_view value) {
    if (value.size() < 4 || static_cast<uint8_t>(value[0]) != kAdminTokenVersion || value[1] != 0) {
        return std::nullopt;
    }
    const nlohmann::json j = nlohmann::json::parse(value.substr(4), nullptr, false);
    if (!j.is_object()) return std::nullopt;
    AdminToken t;
    try {
        if (!parse_id(kAdminTokenIdPrefix, j.at("id").get<std::string>(), t.id)) return std::nullopt;
        t.name = j.at("name").get<std::string>();
        for (const auto &s : j.at("scopes")) {
            const uint32_t bit = admin_scope_named(s.get<std::string>());
            if (bit == 0) return std::nullopt;
            t.scopes |= bit;
        }
        t.created_ms = j.at("createdMs").get<int64_t>();
        if (!j.at("expiresMs").is_null()) t.expires_ms = j.at("expiresMs").get<int64_t>();
        if (!j.at("revokedMs").is_null()) t.revoked_ms = j.at("revokedMs").get<int64_t>();
    } catch (const nlohmann::json::exception &) {
        return std::nullopt;
    }
    return t;
}

nlohmann::json admin_token_json(const AdminToken &t, int64_t now_ms) {
    const char *status = t.revoked_ms ? "revoked" : t.live_at(now_ms) ? "active" : "expired";
    return {{"id", id_to_string(kAdminTokenIdPrefix, t.id)},
            {"name", t.name},
            {"scopes", admin_scope_list(t.scopes)},
            {"createdAt", format_time(t.created_ms)},
            {"expiresAt", time_or_null(t.expires_ms)},
            {"revokedAt", time_or_null(t.revoked_ms)},
            {"status", status}};
}

}  // namespace keyauth
