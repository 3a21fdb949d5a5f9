// API keys: creation (one or many, their ids and secrets), update, revoke,
// roll, and the reads of them (one, or a page of an account's).
#include <algorithm>
#include <cstring>

#include "key_format.h"
#include "key_rules.h"
#include "keyauth_schema.h"
#include "leak_records.h"
#include "quota_json.h"
#include "restrictions.h"
#include "rfc3339.h"
#include "sha256.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

std::string account_key(const Id &account, const Id &key) {
    std::string k(bytes(account));
    k.append(bytes(key));
    return k;
}

[[noreturn]] void conflict(const char *code, const std::string &msg) {
    throw StoreError(StoreError::Kind::kConflict, "", msg, code);
}

[[noreturn]] void no_key(const Id &id) {
    throw StoreError(StoreError::Kind::kNotFound, "id", "no key " + id_to_string(kKeyIdPrefix, id));
}

nlohmann::json time_or_null(int64_t ms) { return ms ? nlohmann::json(format_time(ms)) : nlohmann::json(nullptr); }

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

// A new active key with a fresh secret of `key_prefix` (key_prefix_for_write),
// put with the guard that its hash is new; its quota managed as
// `quota_managed` says (key_rules.h: set_quota).
CreatedKey put_new_key(Mutation &m, std::string_view key_prefix, const Id &account, const KeySpec &spec,
                       const Id &id, int64_t now, bool quota_managed) {
    CreatedKey out;
    out.secret = generate_secret(key_prefix);
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
    rec.quota_managed = quota_managed && !spec.quota.none();
    rec.allowed_ips = spec.allowed_ips;
    rec.meta = spec.meta;
    m.expect(Table::kKeysByHash, bytes(hash), std::nullopt);
    m.put(Table::kKeysByHash, bytes(hash), encode_key_record(rec));
    return out;
}

// The key as a write reads it, refused as "not found" when it belongs to
// another account than `owner`.
FoundKey owned_key(RecordReader &r, const std::optional<Id> &owner, const Id &key_id) {
    auto found = key_in(r, key_id);
    if (!found || (owner && found->record.account_id != *owner)) no_key(key_id);
    return std::move(*found);
}

// One fewer key that is not revoked, in the account's count (the record is
// written back with the guard it was read with).
void release_key(RecordReader &r, Mutation &m, const Id &account) {
    FoundAccount found = account_for_write(r, account);
    AccountRecord rec = found.account.record;
    if (rec.live_keys == KA_LIVE_KEYS_UNKNOWN || rec.live_keys == 0) return;  // counted at the next create
    rec.live_keys--;
    m.expect(Table::kAccounts, bytes(account), found.stored);
    m.put(Table::kAccounts, bytes(account), encode_account_record(rec));
}

}  // namespace

size_t Store::max_keys_per_write() const { return std::min<size_t>(backend_->max_keys_per_write(), 10'000'000); }

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
        admit_activation(r, account, acc.record, spec.scopes, Activation{n, std::nullopt, int32_t(n)}, now,
                         cap_for_write(r, m, acc.record));
        m.expect(Table::kAccounts, bytes(account), found.stored);
        m.put(Table::kAccounts, bytes(account), encode_account_record(acc.record));
        KeyIds ids(r, m);
        const std::string key_prefix = key_prefix_for_write(r, m);
        m.changes.reserve(count + 2);
        m.guards.reserve(count + 5);
        std::vector<CreatedKey> made;
        made.reserve(count);
        for (size_t i = 0; i < count; i++) {
            now = clock_();
            made.push_back(put_new_key(m, key_prefix, account, spec, ids.next(now), now, manages_quotas(actor)));
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
        if (made.front().key.quota_managed) e.change("quotaManaged", nullptr, true);
        if (!spec.allowed_ips.empty()) e.change("allowedIps", nullptr, allowed_ips_to_json(spec.allowed_ips));
        if (!spec.meta.empty()) e.change("meta", nullptr, meta_to_json(spec.meta));
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

namespace {

// Revokes a key that is not revoked, in the write, with its audit event.
void revoke_found(RecordReader &r, Mutation &m, FoundKey &found, int64_t now, const Actor &actor,
                  std::vector<AuditEvent> &events) {
    KeyRecord &rec = found.record;
    rec.status = KA_KEY_REVOKED;
    rec.revoked_ms = now;
    m.expect(Table::kKeysByHash, found.hash, found.stored);
    m.put(Table::kKeysByHash, found.hash, encode_key_record(rec));
    release_key(r, m, rec.account_id);
    AuditEvent &e = audit(events, actor, now, rec.account_id, "key.revoke", "key",
                          id_to_string(kKeyIdPrefix, rec.key_id));
    e.change("status", "active", "revoked");
}

}  // namespace

KeyRecord Store::revoke_key(const std::optional<Id> &owner, const Id &key_id, const Actor &actor) {
    return write([&](RecordReader &r, Mutation &m) {
        FoundKey found = owned_key(r, owner, key_id);
        if (found.record.status == KA_KEY_REVOKED) return found.record;  // nothing to write
        std::vector<AuditEvent> events;
        revoke_found(r, m, found, clock_(), actor, events);
        put_audit(r, m, events);
        return found.record;
    });
}

namespace store_detail {

LeakOutcome key_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w) {
    auto stored = r.get(Table::kKeysByHash, hash);
    if (!stored) return {};
    KeyRecordView view;
    if (decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
        corrupt("a reported key has an unreadable record");
    FoundKey found{hash, *stored, view.to_owned()};
    LeakOutcome out{LeakedSecret::kKey, false, false, found.record.account_id, found.record.key_id};
    if (found.record.status == KA_KEY_REVOKED) return out;
    const std::string leak_key = key_leak_key(out.account, out.target);
    auto earlier = r.get(Table::kReportedLeaks, leak_key);
    if (earlier && w.action == LeakAction::kNotify) return out;  // its account was told already
    if (w.action == LeakAction::kRevoke) {
        revoke_found(r, m, found, w.now, w.actor, w.events);
        out.revoked = true;
    }
    m.expect(Table::kReportedLeaks, leak_key, earlier);
    m.put(Table::kReportedLeaks, leak_key, encode_key_leak(KeyLeak{w.now, w.origin.source, w.origin.url, out.revoked}));
    note_leak(audit(w.events, w.actor, w.now, out.account, "key.leak", "key", id_to_string(kKeyIdPrefix, out.target)),
              w.origin);
    out.recorded = true;
    return out;
}

}  // namespace store_detail

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
        if (changes.quota) {
            const Quota was = rec.quota;
            const bool was_managed = rec.quota_managed;
            set_quota(rec, *changes.quota, actor);  // QUOTA_MANAGED: sold credits the console cannot lift
            if (rec.quota != was) e.change("quota", quota_terms_json(was), quota_terms_json(rec.quota));
            if (rec.quota_managed != was_managed) e.change("quotaManaged", was_managed, rec.quota_managed);
        }
        if (changes.allowed_ips && *changes.allowed_ips != rec.allowed_ips) {
            e.change("allowedIps", allowed_ips_to_json(rec.allowed_ips), allowed_ips_to_json(*changes.allowed_ips));
            rec.allowed_ips = *changes.allowed_ips;
        }
        if (changes.meta && *changes.meta != rec.meta) {
            e.change("meta", meta_to_json(rec.meta), meta_to_json(*changes.meta));
            rec.meta = *changes.meta;
        }
        if (e.changes.empty()) return rec;  // nothing to write
        AccountRecord account = acc.account.record;
        if (!was_active && key_active(rec, now)) {
            // an expired key made active again counts like a new one (but
            // joins its chain, should its predecessor still be in its grace)
            admit_activation(r, rec.account_id, account, rec.scopes, Activation{1, chain_of(rec), 0}, now,
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
        // The successor joins the predecessor's chain, which counts once
        // toward the cap whether the predecessor stops now or after its grace.
        admit_activation(r, old.account_id, acc.record, old.scopes,
                         Activation{1, chain_of(old), grace_seconds == 0 ? 0 : 1}, now,
                         cap_for_write(r, m, acc.record));
        m.expect(Table::kAccounts, bytes(old.account_id), found_acc.stored);
        m.put(Table::kAccounts, bytes(old.account_id), encode_account_record(acc.record));

        KeyIds ids(r, m);
        // the quota goes along, managed or not; the edge charges it by
        // rate_id, so the successor also shares what the chain has used
        KeySpec spec{old.name, old.scopes, old.requested_rpm, expiry_of(old), old.quota, old.allowed_ips, old.meta};
        RolledKey out;
        out.successor =
            put_new_key(m, key_prefix_for_write(r, m), old.account_id, spec, ids.next(now), now, old.quota_managed);
        KeyRecord &next = out.successor.key;
        next.rolled_from = key_id;
        next.rate_id = is_none(old.rate_id) ? key_id : old.rate_id;
        m.changes.back().value = encode_key_record(next);

        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, old.account_id, "key.roll", "key", old_text);
        e.change("rolledTo", nullptr, id_to_string(kKeyIdPrefix, next.key_id));
        // two live secrets a chain at most: the key rolled now ends its own
        // predecessor's grace (its rolledFrom; the event says when it stopped)
        if (!is_none(old.rolled_from)) {
            if (auto older = key_in(r, old.rolled_from)) {
                const int64_t was = older->record.expires_ms;
                if (end_grace(older->record, now)) {
                    e.change("predecessorExpiresAt", time_or_null(was), format_time(now));
                    m.expect(Table::kKeysByHash, older->hash, older->stored);
                    m.put(Table::kKeysByHash, older->hash, encode_key_record(older->record));
                }
            }
        }
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

}  // namespace keyauth
