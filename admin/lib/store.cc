#include "store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "key_format.h"
#include "key_rules.h"
#include "keyauth_schema.h"
#include "le.h"
#include "money.h"
#include "quota_json.h"
#include "rfc3339.h"
#include "scope.h"
#include "sha256.h"

namespace keyauth {
namespace {

template <size_t N>
std::string_view bytes(const std::array<unsigned char, N> &a) {
    return {reinterpret_cast<const char *>(a.data()), N};
}

std::string account_key(const Id &account, const Id &key) {
    std::string k(bytes(account));
    k.append(bytes(key));
    return k;
}

[[noreturn]] void invalid(const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, msg);
}

[[noreturn]] void corrupt(const std::string &msg) {
    throw StoreError(StoreError::Kind::kCorrupt, "", msg);
}

[[noreturn]] void conflict(const char *code, const std::string &msg) {
    throw StoreError(StoreError::Kind::kConflict, "", msg, code);
}

[[noreturn]] void no_account(const Id &id) {
    throw StoreError(StoreError::Kind::kNotFound, "account", "no account " + id_to_string(kAccountIdPrefix, id));
}

[[noreturn]] void no_key(const Id &id) {
    throw StoreError(StoreError::Kind::kNotFound, "id", "no key " + id_to_string(kKeyIdPrefix, id));
}

std::string rate_text(uint64_t micro) {
    char buf[kRateTextMax];
    return std::string(buf, format_rate(micro, buf));
}

nlohmann::json time_or_null(int64_t ms) { return ms ? nlohmann::json(format_time(ms)) : nlohmann::json(nullptr); }

}  // namespace

int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

// Decoders of the records a read returns; a record that does not decode is
// corruption, named by what it belongs to.
Account account_from(const Id &id, std::string_view v) {
    AccountRecordView view;
    if (decode_account_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("account " + id_to_string(kAccountIdPrefix, id) + " has an unreadable record");
    return Account{id, view.to_owned()};
}

// An account read within a write, with the bytes it was read as (its guard).
struct FoundAccount {
    std::string_view stored;
    Account account;
};

FoundAccount account_for_write(RecordReader &r, const Id &id) {
    auto v = r.get(Table::kAccounts, std::string_view(reinterpret_cast<const char *>(id.data()), id.size()));
    if (!v) no_account(id);
    return FoundAccount{*v, account_from(id, *v)};
}

// No allowed scopes means any scope (AccountChanges): only a list given is checked.
void validate_allowed_scopes(const std::optional<std::vector<std::string>> &scopes) {
    if (scopes && !scopes->empty()) validate_scopes(*scopes);
}

void validate_max_keys(uint32_t n) {
    if (n < 1 || n > KA_MAX_KEYS_LIMIT)
        invalid("maxKeys", "maxKeys must be an integer from 1 to " + std::to_string(KA_MAX_KEYS_LIMIT));
}

void validate_grace(int64_t seconds, const char *field) {
    if (seconds < 0 || seconds > Store::kMaxGraceSeconds)
        invalid(field, std::string(field) + " must be an integer from 0 to 604800");
}

std::optional<Account> account_in(RecordReader &r, const Id &id) {
    auto v = r.get(Table::kAccounts, bytes(id));
    if (!v) return std::nullopt;
    return account_from(id, *v);
}

// A key found through the keys index: its hash, its record's bytes (valid
// as long as the reader) and the record.
struct FoundKey {
    std::string_view hash;
    std::string_view stored;
    KeyRecord record;
};

std::optional<FoundKey> key_in(RecordReader &r, const Id &key_id) {
    auto hash = r.get(Table::kKeys, bytes(key_id));
    if (!hash) return std::nullopt;
    auto stored = r.get(Table::kKeysByHash, *hash);
    if (!stored) corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has no record");
    KeyRecordView view;
    if (decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
        corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has an unreadable record");
    return FoundKey{*hash, *stored, view.to_owned()};
}

PlanRecord plan_from(std::string_view id, std::string_view v) {
    PlanRecordView view;
    if (decode_plan_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("plan \"" + std::string(id) + "\" has an unreadable record");
    return view.to_owned(id);
}

[[noreturn]] void no_plan(std::string_view id) {
    throw StoreError(StoreError::Kind::kNotFound, "planId", "no plan \"" + std::string(id.substr(0, 64)) + "\"",
                     "PLAN_NOT_FOUND");
}

// An account's plan as a write reads it, guarded like the account record:
// an import that changes or drops the plan makes the write compute again
// (issue 28). None if the account has no plan or the catalog dropped it.
std::optional<PlanRecord> plan_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc) {
    if (acc.plan_id.empty()) return std::nullopt;
    auto v = r.get(Table::kPlans, acc.plan_id);
    m.expect(Table::kPlans, acc.plan_id, v);
    if (!v) return std::nullopt;
    return plan_from(acc.plan_id, *v);
}

// The account's effective cap on active keys, its plan read (and guarded) in this write.
uint32_t cap_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc) {
    auto plan = plan_for_write(r, m, acc);
    return effective_of(acc, plan ? &*plan : nullptr).max_keys;
}

void validate_quota(const Quota &q, bool total_ok, const char *field) {
    if (!quota_ok(q, total_ok))
        invalid(field, std::string(field) + " must be null or 1 to " + std::to_string(KA_QUOTA_UNITS_MAX) +
                           " units a day or a month" + (total_ok ? ", or in total" : ""));
}

nlohmann::json override_json(const AccountRecord &rec, uint8_t bit) {
    return (rec.overrides & bit) ? nlohmann::json("account") : nlohmann::json("plan");
}

// Key ids grow in creation order (lists page by id), also within one
// millisecond and across writers: each steps past the newest id stored,
// under a guard that none newer appears before the write applies.
class KeyIds {
public:
    KeyIds(RecordReader &r, Mutation &m) {
        std::optional<std::string> newest = r.last_key(Table::kKeys);
        if (newest && newest->size() == last_.size()) std::memcpy(last_.data(), newest->data(), last_.size());
        m.expect_none_after(Table::kKeys, newest.value_or(""));
    }
    Id next(int64_t now) {
        Id id = generate_id(now);
        if (id <= last_) {
            id = last_;
            for (size_t i = id.size(); i-- > 0 && ++id[i] == 0;) {
            }
        }
        return last_ = id;
    }

private:
    Id last_{};
};

// A new active key with a fresh secret, put with the guard that its hash is new.
CreatedKey put_new_key(Mutation &m, const Id &account, const KeySpec &spec, const Id &id, int64_t now) {
    CreatedKey out;
    out.secret = generate_secret(kKeyPrefix);
    Digest hash = sha256(out.secret);
    KeyRecord &rec = out.key;
    rec.status = KA_KEY_ACTIVE;
    rec.requested_rpm = spec.requested_rpm;
    rec.key_id = id;
    rec.account_id = account;
    rec.created_ms = now;
    rec.expires_ms = stored_expiry(spec.expires_at);
    rec.scopes = spec.scopes;
    rec.prefix = out.secret.substr(0, kDisplayPrefixLen);
    rec.name = spec.name;
    rec.quota = spec.quota;
    m.expect(Table::kKeysByHash, bytes(hash), std::nullopt);
    m.put(Table::kKeysByHash, bytes(hash), encode_key_record(rec));
    return out;
}

std::string le_bytes(uint64_t n) {
    unsigned char buf[8];
    store_le<uint64_t>(buf, n);
    return std::string(reinterpret_cast<const char *>(buf), sizeof buf);
}

}  // namespace

Store::Store(const std::string &path, size_t map_size)
    : Store(std::make_unique<LmdbBackend>(path, map_size)) {}

size_t Store::max_keys_per_write() const { return std::min<size_t>(backend_->max_keys_per_write(), 10'000'000); }

Store::Store(std::unique_ptr<StoreBackend> backend)
    : backend_(std::move(backend)), clock_(wall_clock_ms) {}

// Writers that collided (etcd: several keyauthd creating keys at once)
// retry at random moments, over a window that doubles, so that they do not
// collide again in step.
static void back_off(int attempt) {
    static std::atomic<uint32_t> seed{std::random_device{}()};
    std::minstd_rand rng(seed.fetch_add(0x9e3779b9u, std::memory_order_relaxed));
    const int window_ms = std::min(1 << attempt, 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (window_ms + 1)));
}

// One write: `plan` reads what the change depends on through the attempt,
// records in the mutation the records to write and the guards they rest on,
// and returns the caller's answer. The backend applies the mutation only if
// the guards still hold; otherwise the plan runs again from fresh reads (new
// ids and secrets included), a bounded number of times.
// An audit event for the write being computed, in the trail of `account`
// (zero: the operator's own); put_audit gives it its id.
static AuditEvent &audit(std::vector<AuditEvent> &events, const Actor &actor, int64_t now,
                         const Id &account, const char *action, const char *target_type,
                         std::string target_id) {
    AuditEvent &e = events.emplace_back();
    e.account = account;
    e.at_ms = now;
    e.actor = actor;
    e.action = action;
    e.target_type = target_type;
    e.target_id = std::move(target_id);
    return e;
}

// Event ids sort in the order of an account's writes, also within one
// millisecond: each steps past the newest id in that trail (the first of
// its range, ids being stored inverted). Two writers that picked the same
// id collide on the guard and one computes its write again.
static void put_audit(RecordReader &r, Mutation &m, std::vector<AuditEvent> &events) {
    for (AuditEvent &e : events) {
        e.id = generate_id(e.at_ms);
        const std::string trail = audit_key(e.account, Id{}).substr(0, KA_ID_LEN);
        r.scan(Table::kAudit, trail, trail, [&](std::string_view key, std::string_view v) {
            auto newest = decode_audit_record(key, v);
            if (newest && newest->id >= e.id) {
                e.id = newest->id;
                for (size_t i = e.id.size(); i-- > 0 && ++e.id[i] == 0;) {
                }
            }
            return false;
        });
        const std::string key = audit_key(e.account, e.id);
        m.expect(Table::kAudit, key, std::nullopt);
        m.put(Table::kAudit, key, encode_audit_record(e));
    }
}

template <class Plan>
auto Store::write(Plan &&plan) {
    for (int attempt = 1;; attempt++) {
        std::unique_ptr<WriteAttempt> w = backend_->begin_write();
        Mutation m;
        auto answer = plan(static_cast<RecordReader &>(*w), m);
        const auto started = std::chrono::steady_clock::now();
        const bool applied = w->apply(m);
        if (write_observer_) {
            write_observer_(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        }
        if (applied) return answer;
        if (attempt == kWriteAttempts)
            throw StoreError(StoreError::Kind::kBusy, "",
                             "the store kept changing under this write; nothing was written, retry");
        w.reset();
        back_off(attempt);
    }
}

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
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, id);
        Account acc = found.account;
        AccountRecord &rec = acc.record;
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

Account Store::set_plan(const Id &id, const std::optional<std::string> &plan_id, const Actor &actor) {
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

std::optional<Id> Store::account_for_console_token(std::string_view token) {
    auto login = console_login(token);
    if (!login || login->suspended) return std::nullopt;
    return login->account;
}

CreatedKey Store::create_key(const Id &account, const KeySpec &spec, const Actor &actor) {
    return std::move(create_keys(account, spec, 1, actor).front());
}

CreatedKey Store::create_key(const Id &account, std::string_view name,
                             const std::vector<std::string> &scopes, uint32_t requested_rpm) {
    return create_key(account, KeySpec{std::string(name), scopes, requested_rpm, std::nullopt, {}});
}

std::vector<CreatedKey> Store::create_keys(const Id &account, std::string_view name,
                                           const std::vector<std::string> &scopes,
                                           uint32_t requested_rpm, size_t count) {
    return create_keys(account, KeySpec{std::string(name), scopes, requested_rpm, std::nullopt, {}}, count);
}

std::vector<CreatedKey> Store::create_keys(const Id &account, const KeySpec &spec, size_t count,
                                           const Actor &actor,
                                           const std::function<void(size_t made)> &progress) {
    validate_name(spec.name);
    validate_scopes(spec.scopes);
    validate_rate(spec.requested_rpm, "rateLimitPerMinute");
    validate_expiry(spec.expires_at, clock_());
    validate_quota(spec.quota, true, "quota");
    if (count < 1 || count > 10'000'000) invalid("count", "count must be from 1 to 10000000");
    if (count > backend_->max_keys_per_write())
        invalid("count", "this store takes at most " + std::to_string(backend_->max_keys_per_write()) +
                             " keys in one write; create more in batches");
    return write([&](RecordReader &r, Mutation &m) {
        int64_t now = clock_();
        FoundAccount found = account_for_write(r, account);
        Account acc = found.account;
        const auto n = static_cast<uint32_t>(count);
        admit_activation(r, account, acc.record, spec.scopes, Activation{n, 0, int32_t(n)}, now,
                         cap_for_write(r, m, acc.record));
        m.expect(Table::kAccounts, bytes(account), found.stored);
        m.put(Table::kAccounts, bytes(account), encode_account_record(acc.record));
        KeyIds ids(r, m);
        m.changes.reserve(count + 2);
        m.guards.reserve(count + 4);
        std::vector<CreatedKey> made;
        made.reserve(count);
        for (size_t i = 0; i < count; i++) {
            now = clock_();
            made.push_back(put_new_key(m, account, spec, ids.next(now), now));
            if (progress && (i + 1) % 65536 == 0) progress(i + 1);
        }
        if (progress) progress(count);
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, account, "key.create", "key",
                              id_to_string(kKeyIdPrefix, made.front().key.key_id));
        e.change("name", nullptr, spec.name);
        e.change("scopes", nullptr, spec.scopes);
        e.change("rateLimitPerMinute", nullptr, spec.requested_rpm);
        if (spec.expires_at) e.change("expiresAt", nullptr, format_time(*spec.expires_at));
        if (!spec.quota.none()) e.change("quota", nullptr, quota_terms_json(spec.quota));
        if (count > 1) e.change("count", nullptr, count);
        put_audit(r, m, events);
        return made;
    });
}

std::optional<KeyRecord> Store::find_key(const Id &key_id) {
    auto found = key_in(*backend_->read(), key_id);
    if (!found) return std::nullopt;
    return std::move(found->record);
}

KeyPage Store::list_keys(const Id &account, size_t limit, const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto r = backend_->read();
    const std::string start = after ? account_key(account, *after) : std::string(bytes(account));
    const std::string_view owner = bytes(account);
    KeyPage page;
    r->scan(Table::kAccountKeys, owner, start, [&](std::string_view key, std::string_view hash) {
        if (after && key == start) return true;  // the cursor's own key: listed already
        if (key.size() != KA_ACCOUNT_KEY_LEN || key.substr(0, KA_ID_LEN) != owner) return false;
        if (page.keys.size() == limit) {
            page.next = page.keys.back().key_id;
            return false;
        }
        auto stored = r->get(Table::kKeysByHash, hash);
        if (!stored) corrupt("account key index points at no record");
        KeyRecordView view;
        if (decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
            corrupt("unreadable key record in account index");
        page.keys.push_back(view.to_owned());
        return true;
    });
    return page;
}

// catalog_version is the plans table's guard: every write of plans bumps it,
// so an import computed from an older catalog never applies over a newer one.
void Store::import_plans(const std::vector<PlanRecord> &plans, const Actor &actor) {
    validate_catalog(plans);
    write([&](RecordReader &r, Mutation &m) {
        auto version = r.get(Table::kMeta, KA_META_CATALOG_VERSION);
        m.expect(Table::kMeta, KA_META_CATALOG_VERSION, version);
        std::set<std::string_view> kept;
        for (const auto &p : plans) kept.insert(p.id);
        size_t removed = 0;
        r.scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view) {
            if (kept.count(id) == 0) {
                m.erase(Table::kPlans, id);
                removed++;
            }
            return true;
        });
        for (const auto &p : plans) m.put(Table::kPlans, p.id, encode_plan_record(p));
        uint64_t n = version && version->size() == 8
                         ? load_le<uint64_t>(reinterpret_cast<const unsigned char *>(version->data()))
                         : 0;
        m.put(Table::kMeta, KA_META_CATALOG_VERSION, le_bytes(n + 1));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, clock_(), Id{}, "plans.import", "plans", "");
        e.change("catalogVersion", n, n + 1);
        e.change("plans", nullptr, plans.size());
        if (removed) e.change("removed", nullptr, removed);
        put_audit(r, m, events);
        return true;
    });
}

std::vector<PlanRecord> Store::list_plans() {
    std::vector<PlanRecord> out;
    backend_->read()->scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view v) {
        out.push_back(plan_from(id, v));
        return true;
    });
    std::sort(out.begin(), out.end(),
              [](const PlanRecord &a, const PlanRecord &b) { return a.sort_order < b.sort_order; });
    return out;
}

std::optional<PlanRecord> Store::find_plan(std::string_view id) {
    if (id.empty() || id.size() > KA_PLAN_ID_MAX_LEN) return std::nullopt;
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kPlans, id);
    if (!v) return std::nullopt;
    return plan_from(id, *v);
}

FxRecord Store::set_exchange_rate(uint64_t inr_per_usd_micro, const Actor &actor) {
    if (inr_per_usd_micro == 0 || inr_per_usd_micro > kMaxRateMicro)
        invalid("rate", "the rate must be a positive decimal of at most 1000000 INR per USD");
    return write([&](RecordReader &r, Mutation &m) {
        FxRecord rec{inr_per_usd_micro, clock_()};
        std::optional<std::string> before;
        if (auto old = r.get(Table::kMeta, KA_META_FX_USD_INR)) {
            FxRecord was;
            if (decode_fx_record(old->data(), old->size(), was) == DecodeStatus::kOk)
                before = rate_text(was.inr_per_usd_micro);
        }
        m.put(Table::kMeta, KA_META_FX_USD_INR, encode_fx_record(rec));  // the newest rate wins
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, rec.set_ms, Id{}, "fx.set", "fx", "");
        e.change("exchangeRate", before ? nlohmann::json(*before) : nlohmann::json(nullptr),
                 rate_text(inr_per_usd_micro));
        put_audit(r, m, events);
        return rec;
    });
}

std::optional<FxRecord> Store::exchange_rate() {
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kMeta, KA_META_FX_USD_INR);
    if (!v) return std::nullopt;
    FxRecord rec;
    if (decode_fx_record(v->data(), v->size(), rec) != DecodeStatus::kOk)
        corrupt("the exchange rate record is unreadable");
    return rec;
}

// The key as a write reads it, refused as "not found" when it belongs to
// another account than `owner`.
static FoundKey owned_key(RecordReader &r, const std::optional<Id> &owner, const Id &key_id) {
    auto found = key_in(r, key_id);
    if (!found || (owner && found->record.account_id != *owner)) no_key(key_id);
    return std::move(*found);
}

// One fewer key that is not revoked, in the account's count (the record is
// written back with the guard it was read with).
static void release_key(RecordReader &r, Mutation &m, const Id &account) {
    FoundAccount found = account_for_write(r, account);
    AccountRecord rec = found.account.record;
    if (rec.live_keys == KA_LIVE_KEYS_UNKNOWN || rec.live_keys == 0) return;  // counted at the next create
    rec.live_keys--;
    m.expect(Table::kAccounts, bytes(account), found.stored);
    m.put(Table::kAccounts, bytes(account), encode_account_record(rec));
}

KeyRecord Store::revoke_key(const std::optional<Id> &owner, const Id &key_id, const Actor &actor) {
    return write([&](RecordReader &r, Mutation &m) {
        FoundKey found = owned_key(r, owner, key_id);
        KeyRecord rec = std::move(found.record);
        if (rec.status == KA_KEY_REVOKED) return rec;  // nothing to write
        rec.status = KA_KEY_REVOKED;
        rec.revoked_ms = clock_();
        m.expect(Table::kKeysByHash, found.hash, found.stored);
        m.put(Table::kKeysByHash, found.hash, encode_key_record(rec));
        release_key(r, m, rec.account_id);
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, rec.revoked_ms, rec.account_id, "key.revoke", "key",
                              id_to_string(kKeyIdPrefix, key_id));
        e.change("status", "active", "revoked");
        put_audit(r, m, events);
        return rec;
    });
}

KeyRecord Store::update_key(const std::optional<Id> &owner, const Id &key_id, const KeyChanges &changes,
                            const Actor &actor) {
    if (changes.empty()) invalid("body", "nothing to change");
    if (changes.name) validate_name(*changes.name);
    if (changes.scopes) validate_scopes(*changes.scopes);
    if (changes.requested_rpm) validate_rate(*changes.requested_rpm, "rateLimitPerMinute");
    if (changes.quota) validate_quota(*changes.quota, true, "quota");
    return write([&](RecordReader &r, Mutation &m) {
        int64_t now = clock_();
        FoundKey found = owned_key(r, owner, key_id);
        KeyRecord rec = std::move(found.record);
        require_not_revoked(rec);
        FoundAccount acc = account_for_write(r, rec.account_id);
        require_account_active(rec.account_id, acc.account.record);
        const bool was_active = key_active(rec, now);
        AuditEvent e;
        if (changes.expires_at && *changes.expires_at != expiry_of(rec)) {
            validate_expiry(*changes.expires_at, now);
            require_expiry_changeable(rec);
            e.change("expiresAt", time_or_null(rec.expires_ms), time_or_null(stored_expiry(*changes.expires_at)));
            rec.expires_ms = stored_expiry(*changes.expires_at);
        }
        if (changes.name && *changes.name != rec.name) {
            e.change("name", rec.name, *changes.name);
            rec.name = *changes.name;
        }
        if (changes.scopes && *changes.scopes != rec.scopes) {
            require_scopes_allowed(acc.account.record, *changes.scopes);
            e.change("scopes", rec.scopes, *changes.scopes);
            rec.scopes = *changes.scopes;
        }
        if (changes.requested_rpm && *changes.requested_rpm != rec.requested_rpm) {
            e.change("rateLimitPerMinute", rec.requested_rpm, *changes.requested_rpm);
            rec.requested_rpm = *changes.requested_rpm;
        }
        if (changes.quota && *changes.quota != rec.quota) {
            e.change("quota", quota_terms_json(rec.quota), quota_terms_json(*changes.quota));
            rec.quota = *changes.quota;
        }
        if (e.changes.empty()) return rec;  // nothing to write
        AccountRecord account = acc.account.record;
        if (!was_active && key_active(rec, now)) {
            // an expired key made active again counts like a new one
            admit_activation(r, rec.account_id, account, rec.scopes, Activation{1, 0, 0}, now,
                             cap_for_write(r, m, account));
        }
        std::vector<AuditEvent> events;
        audit(events, actor, now, rec.account_id, "key.update", "key", id_to_string(kKeyIdPrefix, key_id))
            .changes = e.changes;
        // the account's guard: not suspended, nor its cap or keys changed meanwhile
        m.expect(Table::kAccounts, bytes(rec.account_id), acc.stored);
        if (account.live_keys != acc.account.record.live_keys)
            m.put(Table::kAccounts, bytes(rec.account_id), encode_account_record(account));
        m.expect(Table::kKeysByHash, found.hash, found.stored);
        m.put(Table::kKeysByHash, found.hash, encode_key_record(rec));
        put_audit(r, m, events);
        return rec;
    });
}

RolledKey Store::roll_key(const std::optional<Id> &owner, const Id &key_id, int64_t grace_seconds,
                          const Actor &actor) {
    validate_grace(grace_seconds, "gracePeriodSeconds");
    return write([&](RecordReader &r, Mutation &m) {
        int64_t now = clock_();
        FoundKey found = owned_key(r, owner, key_id);
        KeyRecord old = std::move(found.record);
        const std::string old_text = id_to_string(kKeyIdPrefix, key_id);
        if (old.status == KA_KEY_REVOKED) conflict("KEY_REVOKED", "key " + old_text + " is revoked");
        if (!is_none(old.rolled_to))
            conflict("KEY_ALREADY_ROLLED", "key " + old_text + " was rolled to " +
                                               id_to_string(kKeyIdPrefix, old.rolled_to));
        if (!key_active(old, now)) conflict("KEY_EXPIRED", "key " + old_text + " has expired");
        FoundAccount found_acc = account_for_write(r, old.account_id);
        Account acc = found_acc.account;
        // The successor is a new active key; without grace the predecessor
        // stops in the same write, with grace both count while both live.
        const uint32_t stopping = grace_seconds == 0 ? 1 : 0;
        admit_activation(r, old.account_id, acc.record, old.scopes,
                         Activation{1, stopping, grace_seconds == 0 ? 0 : 1}, now, cap_for_write(r, m, acc.record));
        m.expect(Table::kAccounts, bytes(old.account_id), found_acc.stored);
        m.put(Table::kAccounts, bytes(old.account_id), encode_account_record(acc.record));

        KeyIds ids(r, m);
        // the quota goes along; the edge charges it by rate_id, so the
        // successor also shares what the chain has used
        KeySpec spec{old.name, old.scopes, old.requested_rpm, expiry_of(old), old.quota};
        RolledKey out;
        out.successor = put_new_key(m, old.account_id, spec, ids.next(now), now);
        KeyRecord &next = out.successor.key;
        next.rolled_from = key_id;
        next.rate_id = is_none(old.rate_id) ? key_id : old.rate_id;
        m.changes.back().value = encode_key_record(next);

        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, old.account_id, "key.roll", "key", old_text);
        e.change("rolledTo", nullptr, id_to_string(kKeyIdPrefix, next.key_id));
        old.rolled_to = next.key_id;
        if (grace_seconds == 0) {
            old.status = KA_KEY_REVOKED;
            old.revoked_ms = now;
            e.change("status", "active", "revoked");
        } else {
            const int64_t end = now + grace_seconds * 1000;
            const int64_t stops = old.expires_ms ? std::min(old.expires_ms, end) : end;
            e.change("expiresAt", time_or_null(old.expires_ms), format_time(stops));
            old.expires_ms = stops;
        }
        m.expect(Table::kKeysByHash, found.hash, found.stored);
        m.put(Table::kKeysByHash, found.hash, encode_key_record(old));
        put_audit(r, m, events);
        out.predecessor = std::move(old);
        return out;
    });
}

// Audit keys hold the event id inverted (audit.cc), so a forward scan of an
// account's range reads its events newest first.
AuditPage Store::list_audit(const std::optional<Id> &account, size_t limit, const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto r = backend_->read();
    AuditPage page;
    auto take = [&](std::string_view key, std::string_view v) {
        auto e = decode_audit_record(key, v);
        if (!e) corrupt("unreadable audit event");
        return *e;
    };
    if (account) {
        const std::string owner(bytes(*account));
        const std::string start = after ? audit_key(*account, *after) : owner;
        r->scan(Table::kAudit, owner, start, [&](std::string_view key, std::string_view v) {
            if (after && key == start) return true;
            if (key.substr(0, KA_ID_LEN) != owner) return false;
            if (page.events.size() == limit) {
                page.next = page.events.back().id;
                return false;
            }
            page.events.push_back(take(key, v));
            return true;
        });
        return page;
    }
    // Every account's trail: read all, newest first (an operator's query).
    std::vector<AuditEvent> all;
    r->scan(Table::kAudit, "", "", [&](std::string_view key, std::string_view v) {
        all.push_back(take(key, v));
        return true;
    });
    std::sort(all.begin(), all.end(), [](const AuditEvent &a, const AuditEvent &b) { return a.id > b.id; });
    size_t from = 0;
    if (after) {
        while (from < all.size() && all[from].id >= *after) from++;
    }
    for (size_t i = from; i < all.size() && page.events.size() < limit; i++) page.events.push_back(all[i]);
    if (from + page.events.size() < all.size() && !page.events.empty()) page.next = page.events.back().id;
    return page;
}

}  // namespace keyauth
