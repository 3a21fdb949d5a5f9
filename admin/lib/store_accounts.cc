// Accounts: creation, their controls and plan, suspension, console tokens,
// and the reads of them (one, with the plan it is on, or all).
#include <cstring>

#include "key_format.h"
#include "key_rules.h"
#include "keyauth_schema.h"
#include "quota_json.h"
#include "restrictions.h"
#include "sha256.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

// No allowed scopes means any scope (AccountChanges): only a list given is checked.
void validate_allowed_scopes(const std::optional<std::vector<std::string>> &scopes) {
    if (scopes && !scopes->empty()) validate_scopes(*scopes);
}

void validate_max_keys(uint32_t n) {
    if (n < 1 || n > KA_MAX_KEYS_LIMIT)
        invalid("maxKeys", "maxKeys must be an integer from 1 to " + std::to_string(KA_MAX_KEYS_LIMIT));
}

std::optional<Account> account_in(RecordReader &r, const Id &id) {
    auto v = r.get(Table::kAccounts, bytes(id));
    if (!v) return std::nullopt;
    return account_from(id, *v);
}

[[noreturn]] void no_plan(std::string_view id) {
    throw StoreError(StoreError::Kind::kNotFound, "planId", "no plan \"" + std::string(id.substr(0, 64)) + "\"",
                     "PLAN_NOT_FOUND");
}

// Following a plan needs one to follow: without it, "plan" would drop the
// account's own value for the defaults (no quota: unlimited, 100 keys).
// Refused as a conflict with the account's state (409 ACCOUNT_HAS_NO_PLAN);
// the plan is guarded, so an import that drops it meanwhile is seen.
void require_plan_to_follow(RecordReader &r, Mutation &m, const Id &id, const AccountRecord &acc) {
    if (plan_for_write(r, m, acc)) return;
    const std::string account = id_to_string(kAccountIdPrefix, id);
    throw StoreError(StoreError::Kind::kConflict, "",
                     acc.plan_id.empty()
                         ? "account " + account + " is on no plan: there is no plan's value to follow"
                         : "account " + account + " is on plan \"" + acc.plan_id +
                               "\", which the catalog does not hold: there is no plan's value to follow",
                     "ACCOUNT_HAS_NO_PLAN");
}

nlohmann::json override_json(const AccountRecord &rec, uint8_t bit) {
    return (rec.overrides & bit) ? nlohmann::json("account") : nlohmann::json("plan");
}

}  // namespace

CreatedAccount Store::create_account(std::string_view name, uint32_t entitlement_rpm,
                                    const AccountChanges &controls, const Actor &actor) {
    validate_name(name);
    // on a plan the entitlement may be left to the plan (0: not given)
    if (entitlement_rpm != 0 || !controls.plan_id) validate_rate(entitlement_rpm, "entitlement");
    if (controls.max_keys) validate_max_keys(*controls.max_keys);
    if (controls.quota) validate_quota(*controls.quota, false, "quota");
    if (controls.follow_plan) invalid("body", "a new account follows its plan for what is not given");
    if (controls.plan_id && (controls.plan_id->empty() || controls.plan_id->size() > KA_PLAN_ID_MAX_LEN))
        no_plan(*controls.plan_id);
    validate_allowed_scopes(controls.allowed_scopes);
    if (controls.external_id) validate_external_id(*controls.external_id);
    return write([&](RecordReader &r, Mutation &m) {
        int64_t now = clock_();
        CreatedAccount out;
        out.account.id = generate_id(now);
        AccountRecord &rec = out.account.record;
        rec.entitlement_rpm = entitlement_rpm;
        rec.created_ms = now;
        rec.name = std::string(name);
        rec.max_keys = controls.max_keys.value_or(KA_DEFAULT_MAX_KEYS);
        rec.allowed_scopes = controls.allowed_scopes.value_or(std::vector<std::string>{});
        rec.allowed_ips = controls.allowed_ips.value_or("");
        rec.meta = controls.meta.value_or("");
        // What is given is the account's own and wins over any plan's
        // (issue 28); what is not follows the plan it is (or will be) on.
        rec.quota = controls.quota.value_or(Quota{});
        rec.overrides = (entitlement_rpm ? KA_OVERRIDE_RATE : 0) | (controls.max_keys ? KA_OVERRIDE_MAX_KEYS : 0) |
                        (controls.quota ? KA_OVERRIDE_QUOTA : 0);
        if (controls.plan_id) {
            auto plan = r.get(Table::kPlans, *controls.plan_id);
            if (!plan) no_plan(*controls.plan_id);
            m.expect(Table::kPlans, *controls.plan_id, plan);
            const PlanRecord p = plan_from(*controls.plan_id, *plan);
            if (!entitlement_rpm && !(p.states & KA_PLAN_STATES_RATE))
                invalid("entitlement", "plan \"" + p.id + "\" states no rate limit: give the account an entitlement");
            rec.plan_id = *controls.plan_id;
            // the record keeps a valid rate of its own, should the plan go
            if (!entitlement_rpm) rec.entitlement_rpm = p.rate_rpm;
        }
        out.console_token = generate_secret(kConsoleTokenPrefix);
        Digest token_hash = sha256(out.console_token);
        m.expect(Table::kAccounts, bytes(out.account.id), std::nullopt);
        m.expect(Table::kConsoleTokens, bytes(token_hash), std::nullopt);
        m.put(Table::kAccounts, bytes(out.account.id), encode_account_record(rec));
        m.put(Table::kConsoleTokens, bytes(token_hash), encode_token_record(TokenRecord{out.account.id, 0}));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, out.account.id, "account.create", "account",
                              id_to_string(kAccountIdPrefix, out.account.id));
        e.change("name", nullptr, rec.name);
        if (!rec.plan_id.empty()) e.change("planId", nullptr, rec.plan_id);
        if (rec.overrides & KA_OVERRIDE_RATE) e.change("entitlementPerMinute", nullptr, rec.entitlement_rpm);
        if (rec.overrides & KA_OVERRIDE_MAX_KEYS) e.change("maxKeys", nullptr, rec.max_keys);
        if (rec.overrides & KA_OVERRIDE_QUOTA) e.change("quota", nullptr, quota_terms_json(rec.quota));
        if (!rec.allowed_scopes.empty()) e.change("allowedScopes", nullptr, rec.allowed_scopes);
        if (!rec.allowed_ips.empty()) e.change("allowedIps", nullptr, allowed_ips_to_json(rec.allowed_ips));
        if (!rec.meta.empty()) e.change("meta", nullptr, meta_to_json(rec.meta));
        if (controls.external_id && *controls.external_id) set_external_id(r, m, out.account.id, **controls.external_id, e);
        put_audit(r, m, events);
        return out;
    });
}

std::optional<Account> Store::find_account(const Id &id) {
    return account_in(*backend_->read(), id);
}

std::vector<Account> Store::list_accounts() {
    std::vector<Account> out;
    backend_->read()->scan(Table::kAccounts, "", "", [&](std::string_view key, std::string_view v) {
        Id id{};
        if (key.size() != id.size()) corrupt("account id of unexpected length");
        std::memcpy(id.data(), key.data(), id.size());
        out.push_back(account_from(id, v));
        return true;
    });
    return out;
}

Account Store::update_account(const Id &id, const AccountChanges &changes, const Actor &actor) {
    if (changes.empty()) invalid("body", "nothing to change");
    if (changes.name) validate_name(*changes.name);
    if (changes.entitlement_rpm) validate_rate(*changes.entitlement_rpm, "entitlement");
    if (changes.max_keys) validate_max_keys(*changes.max_keys);
    if (changes.quota) validate_quota(*changes.quota, false, "quota");
    if (changes.plan_id) invalid("planId", "an account's plan is set with set-plan");
    if ((changes.entitlement_rpm && (changes.follow_plan & KA_OVERRIDE_RATE)) ||
        (changes.max_keys && (changes.follow_plan & KA_OVERRIDE_MAX_KEYS)) ||
        (changes.quota && (changes.follow_plan & KA_OVERRIDE_QUOTA)))
        invalid("body", "a value is either the account's own or its plan's, not both");
    validate_allowed_scopes(changes.allowed_scopes);
    if (changes.external_id) validate_external_id(*changes.external_id);
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, id);
        Account acc = found.account;
        AccountRecord &rec = acc.record;
        if (changes.follow_plan) require_plan_to_follow(r, m, id, rec);
        std::vector<AuditEvent> events;
        AuditEvent e;
        if (changes.name && *changes.name != rec.name) {
            e.change("name", rec.name, *changes.name);
            rec.name = *changes.name;
        }
        // a value given becomes the account's own (its override bit); one
        // to follow the plan clears the bit and keeps the stored value
        auto own = [&](uint8_t bit, const char *name, bool given, bool differs, nlohmann::json was,
                       nlohmann::json now) {
            if (given && differs) e.change(name, was, now);
            const bool want = given ? true : (changes.follow_plan & bit) ? false : (rec.overrides & bit) != 0;
            if (want != ((rec.overrides & bit) != 0)) {
                e.change(std::string(name) + "Source", override_json(rec, bit), want ? "account" : "plan");
                rec.overrides = static_cast<uint8_t>(want ? (rec.overrides | bit) : (rec.overrides & ~bit));
            }
        };
        own(KA_OVERRIDE_RATE, "entitlementPerMinute", changes.entitlement_rpm.has_value(),
            changes.entitlement_rpm && *changes.entitlement_rpm != rec.entitlement_rpm, rec.entitlement_rpm,
            changes.entitlement_rpm.value_or(0));
        if (changes.entitlement_rpm) rec.entitlement_rpm = *changes.entitlement_rpm;
        own(KA_OVERRIDE_MAX_KEYS, "maxKeys", changes.max_keys.has_value(),
            changes.max_keys && *changes.max_keys != rec.max_keys, rec.max_keys, changes.max_keys.value_or(0));
        if (changes.max_keys) rec.max_keys = *changes.max_keys;
        own(KA_OVERRIDE_QUOTA, "quota", changes.quota.has_value(), changes.quota && *changes.quota != rec.quota,
            quota_terms_json(rec.quota), quota_terms_json(changes.quota.value_or(Quota{})));
        if (changes.quota) rec.quota = *changes.quota;
        // following the plan leaves no value of its own behind (what applies
        // without a plan: the defaults, no quota and 100 keys); a rate has
        // no default and is kept
        if ((changes.follow_plan & KA_OVERRIDE_QUOTA) && !rec.quota.none()) {
            e.change("quota", quota_terms_json(rec.quota), nullptr);
            rec.quota = Quota{};
        }
        if ((changes.follow_plan & KA_OVERRIDE_MAX_KEYS) && rec.max_keys != KA_DEFAULT_MAX_KEYS) {
            e.change("maxKeys", rec.max_keys, KA_DEFAULT_MAX_KEYS);
            rec.max_keys = KA_DEFAULT_MAX_KEYS;
        }
        if (changes.allowed_scopes && *changes.allowed_scopes != rec.allowed_scopes) {
            // an empty list reads "any scope", as in the account object: null
            auto shown = [](const std::vector<std::string> &v) {
                return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
            };
            e.change("allowedScopes", shown(rec.allowed_scopes), shown(*changes.allowed_scopes));
            rec.allowed_scopes = *changes.allowed_scopes;
        }
        if (changes.allowed_ips && *changes.allowed_ips != rec.allowed_ips) {
            e.change("allowedIps", allowed_ips_to_json(rec.allowed_ips), allowed_ips_to_json(*changes.allowed_ips));
            rec.allowed_ips = *changes.allowed_ips;
        }
        if (changes.meta && *changes.meta != rec.meta) {
            e.change("meta", meta_to_json(rec.meta), meta_to_json(*changes.meta));
            rec.meta = *changes.meta;
        }
        if (changes.external_id) set_external_id(r, m, id, *changes.external_id, e);
        if (e.changes.empty()) return acc;  // nothing to write
        int64_t now = clock_();
        AuditEvent &ev = audit(events, actor, now, id, "account.update", "account",
                               id_to_string(kAccountIdPrefix, id));
        ev.changes = e.changes;
        m.expect(Table::kAccounts, bytes(id), found.stored);
        m.put(Table::kAccounts, bytes(id), encode_account_record(rec));
        put_audit(r, m, events);
        return acc;
    });
}

Account Store::set_entitlement(const Id &id, uint32_t entitlement_rpm, const Actor &actor) {
    AccountChanges c;
    c.entitlement_rpm = entitlement_rpm;
    return update_account(id, c, actor);
}

std::optional<AccountOnPlan> Store::find_account_on_plan(const Id &id) {
    auto r = backend_->read();  // one read: the account and its plan as of one moment
    auto acc = account_in(*r, id);
    if (!acc) return std::nullopt;
    AccountOnPlan out{std::move(*acc), std::nullopt, {}};
    const std::string &plan_id = out.account.record.plan_id;
    if (!plan_id.empty()) {
        if (auto v = r->get(Table::kPlans, plan_id)) out.plan = plan_from(plan_id, *v);
    }
    out.effective = effective_of(out.account.record, out.plan ? &*out.plan : nullptr);
    return out;
}

Account Store::set_plan(const Id &id, const std::optional<std::string> &plan_id, const Actor &actor,
                        const std::string &order_id) {
    if (plan_id && (plan_id->empty() || plan_id->size() > KA_PLAN_ID_MAX_LEN)) no_plan(*plan_id);
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, id);
        Account acc = found.account;
        const std::string next = plan_id.value_or("");
        if (plan_id) {
            // the plan must exist when the account is put on it, and still when this applies
            auto v = r.get(Table::kPlans, *plan_id);
            if (!v) no_plan(*plan_id);
            m.expect(Table::kPlans, *plan_id, v);
        }
        if (acc.record.plan_id == next) return acc;  // nothing to write
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, clock_(), id, "account.set_plan", "account",
                              id_to_string(kAccountIdPrefix, id));
        auto shown = [](const std::string &p) { return p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p); };
        e.change("planId", shown(acc.record.plan_id), shown(next));
        if (!order_id.empty()) e.change("orderId", nullptr, order_id);
        acc.record.plan_id = next;
        m.expect(Table::kAccounts, bytes(id), found.stored);
        m.put(Table::kAccounts, bytes(id), encode_account_record(acc.record));
        put_audit(r, m, events);
        return acc;
    });
}

Account Store::set_suspended(const Id &id, bool suspended, const Actor &actor) {
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, id);
        Account acc = found.account;
        const uint8_t status = suspended ? KA_ACCOUNT_SUSPENDED : KA_ACCOUNT_ACTIVE;
        if (acc.record.status == status) return acc;  // nothing to write
        if (!suspended) admit_resume(r, id, acc.record, clock_(), cap_for_write(r, m, acc.record));
        acc.record.status = status;
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, clock_(), id, suspended ? "account.suspend" : "account.resume",
                              "account", id_to_string(kAccountIdPrefix, id));
        e.change("status", suspended ? "active" : "suspended", suspended ? "suspended" : "active");
        m.expect(Table::kAccounts, bytes(id), found.stored);
        m.put(Table::kAccounts, bytes(id), encode_account_record(acc.record));
        put_audit(r, m, events);
        return acc;
    });
}

CreatedAccount Store::rotate_console_token(const Id &id, int64_t grace_seconds, const Actor &actor) {
    validate_grace(grace_seconds, "graceSeconds");
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, id);
        int64_t now = clock_();
        m.expect(Table::kAccounts, bytes(id), found.stored);
        // Tokens are found by hash, so the account's are found by reading
        // them all: rotation is rare, accounts are few.
        r.scan(Table::kConsoleTokens, "", "", [&](std::string_view hash, std::string_view v) {
            TokenRecord t;
            if (decode_token_record(v.data(), v.size(), t) != DecodeStatus::kOk || t.account_id != id)
                return true;
            m.expect(Table::kConsoleTokens, hash, v);
            // No grace (a leaked token, say): every old token stops now,
            // also one still in an earlier rotation's grace. With grace the
            // current one gets it; earlier ones keep theirs, or go if over.
            if (t.expires_ms == 0 && grace_seconds > 0) {
                t.expires_ms = now + grace_seconds * 1000;
                m.put(Table::kConsoleTokens, hash, encode_token_record(t));
            } else if (grace_seconds == 0 || t.expires_ms == 0 || now >= t.expires_ms) {
                m.erase(Table::kConsoleTokens, hash);
            }
            return true;
        });
        CreatedAccount out{found.account, generate_secret(kConsoleTokenPrefix)};
        Digest token_hash = sha256(out.console_token);
        m.expect(Table::kConsoleTokens, bytes(token_hash), std::nullopt);
        m.put(Table::kConsoleTokens, bytes(token_hash), encode_token_record(TokenRecord{id, 0}));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, id, "account.rotate_token", "account",
                              id_to_string(kAccountIdPrefix, id));
        e.change("graceSeconds", nullptr, grace_seconds);
        put_audit(r, m, events);
        return out;
    });
}

std::optional<ConsoleLogin> Store::console_login(std::string_view token) {
    if (!secret_format_ok(token, kConsoleTokenPrefix)) return std::nullopt;
    Digest h = sha256(token);
    auto r = backend_->read();
    auto v = r->get(Table::kConsoleTokens, bytes(h));
    if (!v) return std::nullopt;
    TokenRecord t;
    if (decode_token_record(v->data(), v->size(), t) != DecodeStatus::kOk)
        corrupt("console token record is unreadable");
    if (t.expires_ms != 0 && clock_() >= t.expires_ms) return std::nullopt;
    auto acc = account_in(*r, t.account_id);
    if (!acc) return std::nullopt;
    return ConsoleLogin{t.account_id, acc->record.status != KA_ACCOUNT_ACTIVE};
}

namespace store_detail {

// The token stops now: its record goes, and its session entry if it is one.
LeakOutcome console_token_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w) {
    auto stored = r.get(Table::kConsoleTokens, hash);
    if (!stored) return {};
    TokenRecord t;
    if (decode_token_record(stored->data(), stored->size(), t) != DecodeStatus::kOk)
        corrupt("console token record is unreadable");
    LeakOutcome out{LeakedSecret::kConsoleToken, false, false, t.account_id, Id{}};
    if (t.expires_ms != 0 && w.now >= t.expires_ms) return out;  // stopped already
    m.expect(Table::kConsoleTokens, hash, *stored);
    m.erase(Table::kConsoleTokens, hash);
    const std::string session = std::string(bytes(t.account_id)) + std::string(hash);
    if (r.get(Table::kConsoleSessions, session)) m.erase(Table::kConsoleSessions, session);
    AuditEvent &e = audit(w.events, w.actor, w.now, t.account_id, "account.console_token_leak", "account",
                          id_to_string(kAccountIdPrefix, t.account_id));
    e.change("consoleToken", "active", "revoked");
    note_leak(e, w.origin);
    out.revoked = out.recorded = true;
    return out;
}

}  // namespace store_detail

std::optional<Id> Store::account_for_console_token(std::string_view token) {
    auto login = console_login(token);
    if (!login || login->suspended) return std::nullopt;
    return login->account;
}

}  // namespace keyauth
