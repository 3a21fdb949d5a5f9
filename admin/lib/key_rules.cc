#include "key_rules.h"

#include <cstring>
#include <set>

#include "keyauth_schema.h"
#include "scope.h"
#include "store_error.h"

namespace keyauth {
namespace {

[[noreturn]] void conflict(const char *code, const std::string &msg) {
    throw StoreError(StoreError::Kind::kConflict, "", msg, code);
}

[[noreturn]] void forbidden(const char *code, const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kForbidden, field, msg, code);
}

std::string_view id_bytes(const Id &id) { return {reinterpret_cast<const char *>(id.data()), id.size()}; }

// Every key of the account that is not revoked, read through its index;
// `visit` sees each with its scopes.
template <class Visit>
void for_each_live_key(RecordReader &r, const Id &account, Visit &&visit) {
    const std::string_view owner = id_bytes(account);
    r.scan(Table::kAccountKeys, owner, owner, [&](std::string_view key, std::string_view hash) {
        if (key.size() != KA_ACCOUNT_KEY_LEN || key.substr(0, KA_ID_LEN) != owner) return false;
        auto stored = r.get(Table::kKeysByHash, hash);
        KeyRecordView view;
        if (!stored || decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
            throw StoreError(StoreError::Kind::kCorrupt, "", "unreadable key record in account index");
        if (view.status != KA_KEY_REVOKED) visit(view);
        return true;
    });
}

std::string limit_message(size_t active, uint32_t max_keys) {
    return "the account has " + std::to_string(active) + (active == 1 ? " active key" : " active keys") +
           ", its limit is " + std::to_string(max_keys);
}

Id chain_of(const KeyRecordView &key) {
    Id id{};
    std::memcpy(id.data(), key.rate_id, id.size());  // layout 1: its own id
    return id;
}

// What counts toward maxKeys: the roll chains with an active key.
struct ChainCount {
    uint32_t live = 0;      // keys not revoked
    std::set<Id> chains;    // of the active ones
};

ChainCount count_chains(RecordReader &r, const Id &account, int64_t now) {
    ChainCount c;
    for_each_live_key(r, account, [&](const KeyRecordView &k) {
        c.live++;
        if (k.expires_ms == 0 || now < k.expires_ms) c.chains.insert(chain_of(k));
    });
    return c;
}

}  // namespace

Id chain_of(const KeyRecord &key) { return is_none(key.rate_id) ? key.key_id : key.rate_id; }

bool key_active(const KeyRecord &key, int64_t now) {
    return key.status != KA_KEY_REVOKED && (key.expires_ms == 0 || now < key.expires_ms);
}

int64_t stored_expiry(const Expiry &at) { return at ? *at : 0; }

Expiry expiry_of(const KeyRecord &key) { return key.expires_ms ? Expiry(key.expires_ms) : std::nullopt; }

void validate_expiry(const Expiry &at, int64_t now) {
    if (!at) return;
    if (*at <= now) throw StoreError(StoreError::Kind::kInvalid, "expiresAt", "expiresAt must be in the future");
    if (*at - now > kMaxExpiryAheadMs)
        throw StoreError(StoreError::Kind::kInvalid, "expiresAt", "expiresAt must be at most 3652 days ahead");
}

void require_account_active(const Id &id, const AccountRecord &account) {
    if (account.status != KA_ACCOUNT_ACTIVE)
        forbidden("ACCOUNT_SUSPENDED", "account", "account " + id_to_string(kAccountIdPrefix, id) + " is suspended");
}

void require_scopes_allowed(const AccountRecord &account, const std::vector<std::string> &scopes) {
    if (account.allowed_scopes.empty()) return;
    for (const auto &s : scopes) {
        bool ok = false;
        for (const auto &a : account.allowed_scopes) ok = ok || scope_grants(a, s);
        if (!ok)
            forbidden("SCOPE_NOT_ALLOWED", "scopes", "scope \"" + s + "\" is not among the account's allowed scopes");
    }
}

bool manages_quotas(const Actor &actor) { return actor.type != Actor::Type::kConsole; }

void set_quota(KeyRecord &key, const Quota &to, const Actor &actor) {
    if (manages_quotas(actor)) {
        key.quota = to;
        key.quota_managed = !to.none();
        return;
    }
    const bool lowers = !to.none() && to.period == key.quota.period && to.units <= key.quota.units;
    if (key.quota_managed && !lowers)
        forbidden("QUOTA_MANAGED", "quota",
                  "the quota of key " + id_to_string(kKeyIdPrefix, key.key_id) +
                      " was set by an operator: the console may lower it, not raise it, move it to "
                      "another period or remove it");
    key.quota = to;
}

void require_not_revoked(const KeyRecord &key) {
    if (key.status == KA_KEY_REVOKED)
        conflict("KEY_REVOKED", "key " + id_to_string(kKeyIdPrefix, key.key_id) + " is revoked");
}

void require_expiry_changeable(const KeyRecord &key) {
    if (!is_none(key.rolled_to))
        conflict("KEY_ALREADY_ROLLED", "key " + id_to_string(kKeyIdPrefix, key.key_id) + " was rolled to " +
                                           id_to_string(kKeyIdPrefix, key.rolled_to) +
                                           "; its expiry is the end of its grace (revoke it to stop it sooner)");
}

// The account's live-key count (keys not revoked, expired ones included) is
// kept in its record: it bounds the active keys, so the active chains, and a
// write far from the cap admits without reading the keys; near it, the
// chains are counted, since expired keys and a chain's second secret do not
// count.
void admit_activation(RecordReader &r, const Id &id, AccountRecord &account,
                      const std::vector<std::string> &scopes, const Activation &a, int64_t now,
                      uint32_t max_keys) {
    require_account_active(id, account);
    require_scopes_allowed(account, scopes);
    if (account.live_keys == KA_LIVE_KEYS_UNKNOWN || int64_t(account.live_keys) + a.keys > int64_t(max_keys)) {
        ChainCount c = count_chains(r, id, now);
        account.live_keys = c.live;
        const size_t adds = a.chain ? (c.chains.count(*a.chain) ? 0 : 1) : a.keys;
        if (c.chains.size() + adds > max_keys) conflict("KEY_LIMIT_REACHED", limit_message(c.chains.size(), max_keys));
    }
    account.live_keys = static_cast<uint32_t>(int64_t(account.live_keys) + a.live_change);
}

void admit_resume(RecordReader &r, const Id &id, AccountRecord &account, int64_t now, uint32_t max_keys) {
    std::set<Id> chains;
    for_each_live_key(r, id, [&](const KeyRecordView &k) {
        if (k.expires_ms != 0 && now >= k.expires_ms) return;
        chains.insert(chain_of(k));
        KeyRecord owned = k.to_owned();
        require_scopes_allowed(account, owned.scopes);
    });
    if (chains.size() > max_keys)
        conflict("KEY_LIMIT_REACHED", limit_message(chains.size(), max_keys) +
                                          ": revoke keys or raise the limit before resuming it");
}

bool end_grace(KeyRecord &predecessor, int64_t now) {
    if (!key_active(predecessor, now)) return false;
    predecessor.expires_ms = now;
    return true;
}

Entitlements effective_of(const AccountRecord &account, const PlanRecord *plan) {
    AccountRecordView a;
    a.entitlement_rpm = account.entitlement_rpm;
    a.max_keys = account.max_keys;
    a.overrides = account.overrides;
    a.quota = account.quota;
    if (plan == nullptr) return effective_entitlements(a, nullptr);
    PlanRecordView p;
    p.states = plan->states;
    p.rate_rpm = plan->rate_rpm;
    p.max_keys = plan->max_keys;
    p.quota = plan->quota;
    return effective_entitlements(a, &p);
}

}  // namespace keyauth
