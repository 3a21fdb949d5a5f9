// Admin tokens (DESIGN, *Admin API*): how the business's own services (its
// signup, payment, billing and support) authenticate to keyauthd's admin
// listener, each with exactly the scopes it needs. A token is "kaa_" + the
// key format's body and checksum; only its SHA-256 is stored, keyed by it
// in the admin_tokens table (never mirrored to an edge), with the record
// below. keyauthctl makes, lists and revokes them; the Store's writes are
// store_admin_tokens.cc.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"

namespace keyauth {

inline constexpr std::string_view kAdminTokenIdPrefix = "atk_";

// One bit a scope; kAllAdminScopes ("*") is every scope, those to come too.
enum AdminScope : uint32_t {
    kScopeAccountsRead = 1u << 0,
    kScopeAccountsWrite = 1u << 1,
    kScopeAccountsPlan = 1u << 2,
    kScopeKeysRead = 1u << 3,
    kScopeKeysWrite = 1u << 4,
    kScopeSessionsWrite = 1u << 5,
    kScopeUsageRead = 1u << 6,
    kScopeAuditRead = 1u << 7,
    kScopePlansWrite = 1u << 8,
    kScopeFxWrite = 1u << 9,
    kScopeWebhooksWrite = 1u << 10,
    kAllAdminScopes = 1u << 31,
};

// The scope's name ("accounts:read", ..., "*"), or null for a bit that is
// not one scope.
const char *admin_scope_name(uint32_t scope) noexcept;
// The bit of a scope named so, or 0 for a name that is no scope.
uint32_t admin_scope_named(std::string_view name) noexcept;
// Every scope's name, in the order above ("*" last): for usage texts.
std::vector<std::string> admin_scope_names();
// The names of the scopes in `scopes`.
std::vector<std::string> admin_scope_list(uint32_t scopes);
inline bool admin_scopes_grant(uint32_t held, uint32_t needed) noexcept {
    return (held & kAllAdminScopes) != 0 || (held & needed) == needed;
}

struct AdminToken {
    Id id{};
    std::string name;
    uint32_t scopes = 0;
    int64_t created_ms = 0;
    std::optional<int64_t> expires_ms;  // none: never
    std::optional<int64_t> revoked_ms;  // none: live
    bool live_at(int64_t now_ms) const noexcept {
        return !revoked_ms && (!expires_ms || now_ms < *expires_ms);
    }
};

// The stored value: u16 version (1), u16 reserved, the record's JSON. Never
// the token or its hash (the hash is the key). decode: nullopt for anything
// else.
std::string encode_admin_token(const AdminToken &t);
std::optional<AdminToken> decode_admin_token(std::string_view value);

// {id, name, scopes, createdAt, expiresAt, revokedAt, status}: what
// keyauthctl shows. status: "active" | "revoked" | "expired".
nlohmann::json admin_token_json(const AdminToken &t, int64_t now_ms);

}  // namespace keyauth
