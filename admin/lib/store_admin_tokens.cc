// Admin tokens: made (the secret returned once, its hash the key), listed,
// revoked, and looked up by the admin listener for every call.
#include <algorithm>

#include "key_format.h"
#include "key_rules.h"
#include "rfc3339.h"
#include "sha256.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

[[noreturn]] void no_token(const Id &id) {
    throw StoreError(StoreError::Kind::kNotFound, "id",
                     "no admin token " + id_to_string(kAdminTokenIdPrefix, id), "ADMIN_TOKEN_NOT_FOUND");
}

AdminToken token_from(std::string_view v) {
    auto t = decode_admin_token(v);
    if (!t) corrupt("an admin token record is unreadable");
    return *t;
}

// Revokes a live token in the write, with its audit event.
void revoke_token(Mutation &m, std::string_view hash, std::string_view stored, AdminToken &t, int64_t now,
                  const Actor &actor, std::vector<AuditEvent> &events) {
    t.revoked_ms = now;
    m.expect(Table::kAdminTokens, hash, stored);
    m.put(Table::kAdminTokens, hash, encode_admin_token(t));
    AuditEvent &e = audit(events, actor, now, Id{}, "admin_token.revoke", "admin_token",
                          id_to_string(kAdminTokenIdPrefix, t.id));
    e.change("status", "active", "revoked");
}

}  // namespace

CreatedAdminToken Store::create_admin_token(std::string_view name, uint32_t scopes, Expiry expires_at,
                                            const Actor &actor) {
    validate_name(name);
    if (scopes == 0) invalid("scopes", "an admin token needs at least one scope");
    return write([&](RecordReader &r, Mutation &m) {
        const int64_t now = clock_();
        validate_expiry(expires_at, now);
        CreatedAdminToken out;
        out.token.id = generate_id(now);
        out.token.name = std::string(name);
        out.token.scopes = scopes;
        out.token.created_ms = now;
        out.token.expires_ms = expires_at;
        out.secret = generate_secret(kAdminTokenPrefix);
        const Digest hash = sha256(out.secret);
        m.expect(Table::kAdminTokens, bytes(hash), std::nullopt);
        m.put(Table::kAdminTokens, bytes(hash), encode_admin_token(out.token));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, Id{}, "admin_token.create", "admin_token",
                              id_to_string(kAdminTokenIdPrefix, out.token.id));
        e.change("name", nullptr, out.token.name);
        e.change("scopes", nullptr, admin_scope_list(scopes));
        if (expires_at) e.change("expiresAt", nullptr, format_time(*expires_at));
        put_audit(r, m, events);
        return out;
    });
}

std::vector<AdminToken> Store::list_admin_tokens() {
    std::vector<AdminToken> out;
    backend_->read()->scan(Table::kAdminTokens, "", "", [&](std::string_view, std::string_view v) {
        out.push_back(token_from(v));
        return true;
    });
    std::sort(out.begin(), out.end(), [](const AdminToken &a, const AdminToken &b) { return a.id < b.id; });
    return out;
}

AdminToken Store::revoke_admin_token(const Id &id, const Actor &actor) {
    return write([&](RecordReader &r, Mutation &m) {
        // found by reading them all: tokens are a handful, revoked rarely
        std::optional<std::pair<std::string, std::string>> found;
        r.scan(Table::kAdminTokens, "", "", [&](std::string_view hash, std::string_view v) {
            if (token_from(v).id != id) return true;
            found.emplace(std::string(hash), std::string(v));
            return false;
        });
        if (!found) no_token(id);
        AdminToken t = token_from(found->second);
        if (t.revoked_ms) return t;  // nothing to write
        std::vector<AuditEvent> events;
        revoke_token(m, found->first, found->second, t, clock_(), actor, events);
        put_audit(r, m, events);
        return t;
    });
}

namespace store_detail {

LeakOutcome admin_token_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w) {
    auto stored = r.get(Table::kAdminTokens, hash);
    if (!stored) return {};
    AdminToken t = token_from(*stored);
    LeakOutcome out{LeakedSecret::kAdminToken, false, false, Id{}, t.id};
    if (t.revoked_ms) return out;
    revoke_token(m, hash, *stored, t, w.now, w.actor, w.events);
    note_leak(audit(w.events, w.actor, w.now, Id{}, "admin_token.leak", "admin_token",
                    id_to_string(kAdminTokenIdPrefix, t.id)),
              w.origin);
    out.revoked = out.recorded = true;
    return out;
}

}  // namespace store_detail

std::optional<AdminToken> Store::admin_login(std::string_view secret) {
    if (!secret_format_ok(secret, kAdminTokenPrefix)) return std::nullopt;
    const Digest hash = sha256(secret);
    auto r = backend_->read();
    auto v = r->get(Table::kAdminTokens, bytes(hash));
    if (!v) return std::nullopt;
    AdminToken t = token_from(*v);
    if (!t.live_at(clock_())) return std::nullopt;
    return t;
}

}  // namespace keyauth
