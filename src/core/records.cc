#include "records.h"

#include <cstring>
#include <stdexcept>

#include "ip_allowlist.h"
#include "le.h"
#include "scope.h"

namespace keyauth {
namespace {

using F = ka_key_record_v1;
using F2 = ka_key_record_v2;
using A = ka_account_record_v1;
using A2 = ka_account_record_v2;
using A3 = ka_account_record_v3;
using F3 = ka_key_record_v3;
using F4 = ka_key_record_v4;
using F5 = ka_key_record_v5;
using A4 = ka_account_record_v4;
using R = ka_restrictions_v1;
using T = ka_token_record_v1;
using T2 = ka_token_record_v2;

const unsigned char *bytes(const void *p) { return static_cast<const unsigned char *>(p); }

std::string_view view(const unsigned char *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n);
}

// Walks packed (u8 length, bytes) entries (scopes, features); returns false
// if they do not tile `packed` exactly into `count` entries of 1..max_len
// bytes. Stops early, returning true, when fn returns true.
template <typename Fn>
bool walk_packed(std::string_view packed, size_t count, size_t max_len, Fn &&fn) {
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        if (off >= packed.size()) {
            return false;
        }
        size_t len = static_cast<unsigned char>(packed[off++]);
        if (len == 0 || len > max_len || len > packed.size() - off) {
            return false;
        }
        if (fn(packed.substr(off, len))) {
            return true;
        }
        off += len;
    }
    return off == packed.size();
}

void require(bool ok, const char *what) {
    if (!ok) {
        throw std::invalid_argument(what);
    }
}

// Scopes as packed (u8 length, bytes) entries, each checked for the bounds
// the readers rely on.
std::string pack_scopes(const std::vector<std::string> &scopes) {
    require(scopes.size() <= KA_SCOPES_MAX, "too many scopes");
    std::string packed;
    for (const auto &s : scopes) {
        require(!s.empty() && s.size() <= KA_SCOPE_MAX_LEN, "scope length");
        packed.push_back(static_cast<char>(s.size()));
        packed += s;
    }
    return packed;
}

std::vector<std::string> unpack_scopes(std::string_view packed, size_t count) {
    std::vector<std::string> out;
    walk_packed(packed, count, KA_SCOPE_MAX_LEN, [&](std::string_view s) {
        out.emplace_back(s);
        return false;
    });
    return out;
}

void copy_id(Id &to, const unsigned char *from) {
    if (from) std::memcpy(to.data(), from, KA_ID_LEN);
}

// The restrictions of key layout 5 and account layout 4: the same fields at
// the same place after each head.
struct Restrictions {
    size_t ips_bytes = 0, meta_bytes = 0;
};

bool meta_bytes_ok(size_t n) { return n == 0 || (n >= 2 && n <= KA_META_MAX_BYTES); }

void encode_restrictions(unsigned char *at, const std::string &ips, const std::string &meta) {
    require(ips.empty() || allowed_ips_ok(ips), "allowed IPs");
    require(meta_bytes_ok(meta.size()), "meta size");
    at[offsetof(R, allowed_ip_count)] = static_cast<unsigned char>(ips.size() / KA_CIDR_ENTRY_BYTES);
    store_le<uint16_t>(at + offsetof(R, meta_bytes), static_cast<uint16_t>(meta.size()));
}

bool decode_restrictions(const unsigned char *at, Restrictions &r) {
    const size_t count = at[offsetof(R, allowed_ip_count)];
    r.ips_bytes = count * KA_CIDR_ENTRY_BYTES;
    r.meta_bytes = load_le<uint16_t>(at + offsetof(R, meta_bytes));
    return count <= KA_ALLOWED_IPS_MAX && meta_bytes_ok(r.meta_bytes) && at[offsetof(R, reserved8)] == 0 &&
           load_le<uint32_t>(at + offsetof(R, reserved32)) == 0;
}

// Views the restrictions at the end of a record and checks them.
bool view_restrictions(const unsigned char *at, const Restrictions &r, std::string_view &ips,
                       std::string_view &meta) {
    ips = view(at, r.ips_bytes);
    meta = view(at + r.ips_bytes, r.meta_bytes);
    return ips.empty() || allowed_ips_ok(ips);
}

}  // namespace

bool quota_ok(const Quota &q, bool total_ok) noexcept {
    switch (q.period) {
        case KA_QUOTA_NONE: return q.units == 0;
        case KA_QUOTA_DAY:
        case KA_QUOTA_MONTH: break;
        case KA_QUOTA_TOTAL:
            if (!total_ok) return false;
            break;
        default: return false;
    }
    return q.units >= 1 && q.units <= KA_QUOTA_UNITS_MAX;
}

namespace {

Quota load_quota(const unsigned char *period, const unsigned char *units) {
    return Quota{*period, load_le<uint64_t>(units)};
}

}  // namespace

bool packed_scopes_ok(std::string_view packed, size_t count) noexcept {
    return walk_packed(packed, count, KA_SCOPE_MAX_LEN, [](std::string_view) { return false; });
}

bool KeyRecordView::grants(std::string_view required) const noexcept {
    bool granted = false;
    walk_packed(scopes, scope_count, KA_SCOPE_MAX_LEN, [&](std::string_view s) {
        granted = scope_grants(s, required);
        return granted;
    });
    return granted;
}

KeyRecord KeyRecordView::to_owned() const {
    KeyRecord r;
    r.status = status;
    r.requested_rpm = requested_rpm;
    std::memcpy(r.key_id.data(), key_id, KA_ID_LEN);
    std::memcpy(r.account_id.data(), account_id, KA_ID_LEN);
    r.created_ms = created_ms;
    r.revoked_ms = revoked_ms;
    r.expires_ms = expires_ms;
    r.scopes = unpack_scopes(scopes, scope_count);
    r.prefix = std::string(prefix);
    r.name = std::string(name);
    copy_id(r.rolled_from, rolled_from);
    copy_id(r.rolled_to, rolled_to);
    // A rate id that is the key's own is kept as none: the record says so.
    if (rate_id && std::memcmp(rate_id, key_id, KA_ID_LEN) != 0) copy_id(r.rate_id, rate_id);
    r.quota = quota;
    r.quota_managed = quota_managed;
    r.allowed_ips = std::string(allowed_ips);
    r.meta = std::string(meta);
    return r;
}

std::string encode_key_record(const KeyRecord &rec) {
    require(rec.status == KA_KEY_ACTIVE || rec.status == KA_KEY_REVOKED, "key status");
    require(rec.prefix.size() <= KA_PREFIX_MAX_LEN, "prefix too long");
    require(rec.name.size() <= KA_NAME_MAX_LEN, "name too long");
    require(quota_ok(rec.quota, true), "key quota");
    require(!rec.quota_managed || !rec.quota.none(), "a managed quota without a quota");
    std::string packed = pack_scopes(rec.scopes);
    // layouts 3 and 4 share the head; 4 marks the quota managed; 5 adds the
    // restrictions, written only for a key that has one
    const bool v5 = !rec.allowed_ips.empty() || !rec.meta.empty();
    const bool v3 = !rec.quota.none() || v5;
    std::string out(v5 ? KA_KEY_RECORD_V5_HEAD : v3 ? KA_KEY_RECORD_V3_HEAD : KA_KEY_RECORD_V2_HEAD, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(F, version), v5                ? KA_KEY_RECORD_V5
                                                 : rec.quota_managed ? KA_KEY_RECORD_V4
                                                 : v3                ? KA_KEY_RECORD_V3
                                                                     : KA_KEY_RECORD_V2);
    p[offsetof(F, status)] = rec.status;
    p[offsetof(F, scope_count)] = static_cast<unsigned char>(rec.scopes.size());
    store_le<uint32_t>(p + offsetof(F, requested_rpm), rec.requested_rpm);
    std::memcpy(p + offsetof(F, key_id), rec.key_id.data(), KA_ID_LEN);
    std::memcpy(p + offsetof(F, account_id), rec.account_id.data(), KA_ID_LEN);
    store_le<int64_t>(p + offsetof(F, created_ms), rec.created_ms);
    store_le<int64_t>(p + offsetof(F, revoked_ms), rec.revoked_ms);
    store_le<int64_t>(p + offsetof(F, expires_ms), rec.expires_ms);
    store_le<uint16_t>(p + offsetof(F, scopes_bytes), static_cast<uint16_t>(packed.size()));
    p[offsetof(F, prefix_len)] = static_cast<unsigned char>(rec.prefix.size());
    p[offsetof(F, name_len)] = static_cast<unsigned char>(rec.name.size());
    const Id &rate_id = is_none(rec.rate_id) ? rec.key_id : rec.rate_id;
    std::memcpy(p + offsetof(F2, rate_id), rate_id.data(), KA_ID_LEN);
    std::memcpy(p + offsetof(F2, rolled_from), rec.rolled_from.data(), KA_ID_LEN);
    std::memcpy(p + offsetof(F2, rolled_to), rec.rolled_to.data(), KA_ID_LEN);
    if (v3) {
        p[offsetof(F3, quota_period)] = rec.quota.period;
        store_le<uint64_t>(p + offsetof(F3, quota_units), rec.quota.units);
        if (rec.quota_managed) p[offsetof(F4, quota_flags)] = KA_KEY_QUOTA_MANAGED;
    }
    if (v5) encode_restrictions(p + offsetof(F5, restrictions), rec.allowed_ips, rec.meta);
    out += packed;
    out += rec.prefix;
    out += rec.name;
    if (v5) out += rec.allowed_ips + rec.meta;
    return out;
}

DecodeStatus decode_key_record(const void *data, size_t len, KeyRecordView &out) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    out.version = load_le<uint16_t>(p + offsetof(F, version));
    if (out.version < KA_KEY_RECORD_V1 || out.version > KA_KEY_RECORD_V5) {
        return DecodeStatus::kUnknownVersion;
    }
    const bool own_quota = out.version == KA_KEY_RECORD_V3 || out.version == KA_KEY_RECORD_V4;
    const bool v5 = out.version == KA_KEY_RECORD_V5;
    const size_t head = out.version == KA_KEY_RECORD_V1   ? KA_KEY_RECORD_HEAD
                        : out.version == KA_KEY_RECORD_V2 ? KA_KEY_RECORD_V2_HEAD
                        : v5                              ? KA_KEY_RECORD_V5_HEAD
                                                          : KA_KEY_RECORD_V3_HEAD;
    if (len < head) {
        return DecodeStatus::kCorrupt;
    }
    Restrictions restrictions;
    if (v5 && !decode_restrictions(p + offsetof(F5, restrictions), restrictions)) {
        return DecodeStatus::kCorrupt;
    }
    out.status = p[offsetof(F, status)];
    out.scope_count = p[offsetof(F, scope_count)];
    out.requested_rpm = load_le<uint32_t>(p + offsetof(F, requested_rpm));
    out.key_id = p + offsetof(F, key_id);
    out.account_id = p + offsetof(F, account_id);
    out.created_ms = load_le<int64_t>(p + offsetof(F, created_ms));
    out.revoked_ms = load_le<int64_t>(p + offsetof(F, revoked_ms));
    out.expires_ms = load_le<int64_t>(p + offsetof(F, expires_ms));
    size_t scopes_bytes = load_le<uint16_t>(p + offsetof(F, scopes_bytes));
    size_t prefix_len = p[offsetof(F, prefix_len)];
    size_t name_len = p[offsetof(F, name_len)];
    if ((out.status != KA_KEY_ACTIVE && out.status != KA_KEY_REVOKED) ||
        out.scope_count > KA_SCOPES_MAX || prefix_len > KA_PREFIX_MAX_LEN ||
        name_len > KA_NAME_MAX_LEN ||
        len != head + scopes_bytes + prefix_len + name_len + restrictions.ips_bytes +
                   restrictions.meta_bytes) {
        return DecodeStatus::kCorrupt;
    }
    if (out.version == KA_KEY_RECORD_V1) {
        out.rate_id = out.key_id;
        out.rolled_from = out.rolled_to = nullptr;
    } else {
        out.rate_id = p + offsetof(F2, rate_id);
        out.rolled_from = p + offsetof(F2, rolled_from);
        out.rolled_to = p + offsetof(F2, rolled_to);
    }
    out.quota = Quota{};
    out.quota_managed = out.version == KA_KEY_RECORD_V4;
    if (own_quota || v5) {
        out.quota = load_quota(p + offsetof(F3, quota_period), p + offsetof(F3, quota_units));
        // layout 5's quota is optional, and so is its mark
        if ((own_quota && out.quota.none()) || !quota_ok(out.quota, true)) return DecodeStatus::kCorrupt;
    }
    if (v5) {
        const uint8_t flags = p[offsetof(F4, quota_flags)];
        if (flags != 0 && (flags != KA_KEY_QUOTA_MANAGED || out.quota.none())) return DecodeStatus::kCorrupt;
        out.quota_managed = flags == KA_KEY_QUOTA_MANAGED;
    }
    if (out.version == KA_KEY_RECORD_V4 && p[offsetof(F4, quota_flags)] != KA_KEY_QUOTA_MANAGED)
        return DecodeStatus::kCorrupt;
    const unsigned char *tail = p + head;
    out.scopes = view(tail, scopes_bytes);
    out.prefix = view(tail + scopes_bytes, prefix_len);
    out.name = view(tail + scopes_bytes + prefix_len, name_len);
    out.allowed_ips = out.meta = std::string_view();
    if (v5 && !view_restrictions(tail + scopes_bytes + prefix_len + name_len, restrictions,
                                 out.allowed_ips, out.meta)) {
        return DecodeStatus::kCorrupt;
    }
    return packed_scopes_ok(out.scopes, out.scope_count) ? DecodeStatus::kOk
                                                          : DecodeStatus::kCorrupt;
}

std::string encode_account_record(const AccountRecord &rec) {
    require(rec.status == KA_ACCOUNT_ACTIVE || rec.status == KA_ACCOUNT_SUSPENDED,
            "account status");
    require(rec.name.size() <= KA_NAME_MAX_LEN, "name too long");
    require(rec.max_keys >= 1 && rec.max_keys <= KA_MAX_KEYS_LIMIT, "max keys");
    require(quota_ok(rec.quota, false), "account quota");
    require(rec.plan_id.size() <= KA_PLAN_ID_MAX_LEN, "plan id too long");
    require((rec.overrides & ~(KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA)) == 0,
            "account overrides");
    std::string packed = pack_scopes(rec.allowed_scopes);
    // layout 4 only for an account with restrictions: older edges read the rest
    const bool v4 = !rec.allowed_ips.empty() || !rec.meta.empty();
    std::string out(v4 ? KA_ACCOUNT_RECORD_V4_HEAD : KA_ACCOUNT_RECORD_V3_HEAD, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(A, version), v4 ? KA_ACCOUNT_RECORD_V4 : KA_ACCOUNT_RECORD_V3);
    p[offsetof(A, status)] = rec.status;
    p[offsetof(A, name_len)] = static_cast<unsigned char>(rec.name.size());
    store_le<uint32_t>(p + offsetof(A, entitlement_rpm), rec.entitlement_rpm);
    store_le<int64_t>(p + offsetof(A, created_ms), rec.created_ms);
    store_le<uint32_t>(p + offsetof(A2, max_keys), rec.max_keys);
    store_le<uint32_t>(p + offsetof(A2, live_keys), rec.live_keys);
    store_le<uint16_t>(p + offsetof(A2, allowed_scopes_bytes), static_cast<uint16_t>(packed.size()));
    p[offsetof(A2, allowed_scope_count)] = static_cast<unsigned char>(rec.allowed_scopes.size());
    p[offsetof(A3, overrides)] = rec.overrides;
    p[offsetof(A3, quota_period)] = rec.quota.period;
    p[offsetof(A3, plan_id_len)] = static_cast<unsigned char>(rec.plan_id.size());
    store_le<uint64_t>(p + offsetof(A3, quota_units), rec.quota.units);
    if (v4) encode_restrictions(p + offsetof(A4, restrictions), rec.allowed_ips, rec.meta);
    out += rec.name;
    out += packed;
    out += rec.plan_id;
    if (v4) out += rec.allowed_ips + rec.meta;
    return out;
}

AccountRecord AccountRecordView::to_owned() const {
    AccountRecord r;
    r.status = status;
    r.entitlement_rpm = entitlement_rpm;
    r.created_ms = created_ms;
    r.name = std::string(name);
    r.max_keys = max_keys;
    r.live_keys = live_keys;
    r.allowed_scopes = unpack_scopes(allowed_scopes, allowed_scope_count);
    r.plan_id = std::string(plan_id);
    r.overrides = overrides;
    r.quota = quota;
    r.allowed_ips = std::string(allowed_ips);
    r.meta = std::string(meta);
    return r;
}

DecodeStatus decode_account_record(const void *data, size_t len, AccountRecordView &out) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    out.version = load_le<uint16_t>(p + offsetof(A, version));
    if (out.version < KA_ACCOUNT_RECORD_V1 || out.version > KA_ACCOUNT_RECORD_V4) {
        return DecodeStatus::kUnknownVersion;
    }
    const bool v1 = out.version == KA_ACCOUNT_RECORD_V1;
    const bool v4 = out.version == KA_ACCOUNT_RECORD_V4;
    const bool v3 = out.version == KA_ACCOUNT_RECORD_V3 || v4;  // layout 4 is 3 and more
    const size_t head = v1 ? KA_ACCOUNT_RECORD_HEAD
                        : v4 ? KA_ACCOUNT_RECORD_V4_HEAD
                        : v3 ? KA_ACCOUNT_RECORD_V3_HEAD
                             : KA_ACCOUNT_RECORD_V2_HEAD;
    if (len < head) {
        return DecodeStatus::kCorrupt;
    }
    Restrictions restrictions;
    if (v4 && !decode_restrictions(p + offsetof(A4, restrictions), restrictions)) {
        return DecodeStatus::kCorrupt;
    }
    out.status = p[offsetof(A, status)];
    out.entitlement_rpm = load_le<uint32_t>(p + offsetof(A, entitlement_rpm));
    out.created_ms = load_le<int64_t>(p + offsetof(A, created_ms));
    size_t name_len = p[offsetof(A, name_len)];
    size_t scopes_bytes = 0;
    out.max_keys = KA_DEFAULT_MAX_KEYS;
    out.live_keys = KA_LIVE_KEYS_UNKNOWN;
    out.allowed_scope_count = 0;
    if (!v1) {
        out.max_keys = load_le<uint32_t>(p + offsetof(A2, max_keys));
        out.live_keys = load_le<uint32_t>(p + offsetof(A2, live_keys));
        scopes_bytes = load_le<uint16_t>(p + offsetof(A2, allowed_scopes_bytes));
        out.allowed_scope_count = p[offsetof(A2, allowed_scope_count)];
    }
    size_t plan_id_len = 0;
    out.overrides = KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA;
    out.quota = Quota{};
    if (v3) {
        out.overrides = p[offsetof(A3, overrides)];
        plan_id_len = p[offsetof(A3, plan_id_len)];
        out.quota = load_quota(p + offsetof(A3, quota_period), p + offsetof(A3, quota_units));
    }
    if ((out.status != KA_ACCOUNT_ACTIVE && out.status != KA_ACCOUNT_SUSPENDED) ||
        name_len > KA_NAME_MAX_LEN || out.max_keys < 1 || out.max_keys > KA_MAX_KEYS_LIMIT ||
        out.allowed_scope_count > KA_SCOPES_MAX || plan_id_len > KA_PLAN_ID_MAX_LEN ||
        (out.overrides & ~(KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA)) != 0 ||
        !quota_ok(out.quota, false) ||
        len != head + name_len + scopes_bytes + plan_id_len + restrictions.ips_bytes +
                   restrictions.meta_bytes) {
        return DecodeStatus::kCorrupt;
    }
    out.name = view(p + head, name_len);
    out.allowed_scopes = view(p + head + name_len, scopes_bytes);
    out.plan_id = view(p + head + name_len + scopes_bytes, plan_id_len);
    out.allowed_ips = out.meta = std::string_view();
    if (v4 && !view_restrictions(p + head + name_len + scopes_bytes + plan_id_len, restrictions,
                                 out.allowed_ips, out.meta)) {
        return DecodeStatus::kCorrupt;
    }
    if (!walk_packed(out.allowed_scopes, out.allowed_scope_count, KA_SCOPE_MAX_LEN,
                     [](std::string_view) { return false; })) {
        return DecodeStatus::kCorrupt;
    }
    return DecodeStatus::kOk;
}

PlanRecord PlanRecordView::to_owned(std::string_view id) const {
    PlanRecord r;
    r.id = std::string(id);
    r.name = std::string(name);
    r.price_paise = price_paise;
    r.popular = popular;
    r.sort_order = sort_order;
    for (auto f : feature_list()) r.features.emplace_back(f);
    r.states = states;
    r.rate_rpm = rate_rpm;
    r.max_keys = max_keys;
    r.quota = quota;
    return r;
}

std::vector<std::string_view> PlanRecordView::feature_list() const {
    std::vector<std::string_view> out;
    walk_packed(features, feature_count, KA_FEATURE_MAX_LEN, [&](std::string_view f) {
        out.push_back(f);
        return false;
    });
    return out;
}

namespace {
constexpr uint8_t kPlanStatesAll = KA_PLAN_STATES_RATE | KA_PLAN_STATES_MAX_KEYS | KA_PLAN_STATES_QUOTA;

// What a plan may state: a rate of at least 1, a cap within the account
// bound, a day or month quota or none (unlimited); unstated values are 0.
bool plan_entitlements_ok(uint8_t states, uint32_t rate_rpm, uint32_t max_keys,
                          const Quota &quota) {
    if ((states & ~kPlanStatesAll) != 0) return false;
    if ((states & KA_PLAN_STATES_RATE) ? rate_rpm < 1 : rate_rpm != 0) return false;
    if ((states & KA_PLAN_STATES_MAX_KEYS) ? (max_keys < 1 || max_keys > KA_MAX_KEYS_LIMIT)
                                           : max_keys != 0) {
        return false;
    }
    return (states & KA_PLAN_STATES_QUOTA) ? quota_ok(quota, false) : quota.none();
}
}  // namespace

std::string encode_plan_record(const PlanRecord &rec) {
    using P = ka_plan_record_v1;
    using P2 = ka_plan_record_v2;
    require(!rec.name.empty() && rec.name.size() <= KA_NAME_MAX_LEN, "plan name length");
    require(rec.features.size() <= KA_FEATURES_MAX, "too many features");
    require(plan_entitlements_ok(rec.states, rec.rate_rpm, rec.max_keys, rec.quota),
            "plan entitlements");
    std::string out(KA_PLAN_RECORD_V2_HEAD, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(P, version), KA_PLAN_RECORD_V2);
    p[offsetof(P2, states)] = rec.states;
    p[offsetof(P2, quota_period)] = rec.quota.period;
    store_le<uint32_t>(p + offsetof(P2, rate_rpm), rec.rate_rpm);
    store_le<uint32_t>(p + offsetof(P2, max_keys), rec.max_keys);
    store_le<uint64_t>(p + offsetof(P2, quota_units), rec.quota.units);
    p[offsetof(P, popular)] = rec.popular ? 1 : 0;
    p[offsetof(P, feature_count)] = static_cast<unsigned char>(rec.features.size());
    store_le<int32_t>(p + offsetof(P, sort_order), rec.sort_order);
    store_le<uint64_t>(p + offsetof(P, price_paise), rec.price_paise);
    p[offsetof(P, name_len)] = static_cast<unsigned char>(rec.name.size());
    out += rec.name;
    for (const auto &f : rec.features) {
        require(!f.empty() && f.size() <= KA_FEATURE_MAX_LEN, "feature length");
        out.push_back(static_cast<char>(f.size()));
        out += f;
    }
    return out;
}

DecodeStatus decode_plan_record(const void *data, size_t len, PlanRecordView &out) noexcept {
    using P = ka_plan_record_v1;
    using P2 = ka_plan_record_v2;
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) return DecodeStatus::kCorrupt;
    out.version = load_le<uint16_t>(p + offsetof(P, version));
    if (out.version != KA_PLAN_RECORD_V1 && out.version != KA_PLAN_RECORD_V2) {
        return DecodeStatus::kUnknownVersion;
    }
    const size_t head = out.version == KA_PLAN_RECORD_V1 ? KA_PLAN_RECORD_HEAD : KA_PLAN_RECORD_V2_HEAD;
    if (len < head) return DecodeStatus::kCorrupt;
    out.states = 0;
    out.rate_rpm = out.max_keys = 0;
    out.quota = Quota{};
    if (out.version == KA_PLAN_RECORD_V2) {
        out.states = p[offsetof(P2, states)];
        out.rate_rpm = load_le<uint32_t>(p + offsetof(P2, rate_rpm));
        out.max_keys = load_le<uint32_t>(p + offsetof(P2, max_keys));
        out.quota = load_quota(p + offsetof(P2, quota_period), p + offsetof(P2, quota_units));
        if (!plan_entitlements_ok(out.states, out.rate_rpm, out.max_keys, out.quota)) {
            return DecodeStatus::kCorrupt;
        }
    }
    out.popular = p[offsetof(P, popular)] != 0;
    out.feature_count = p[offsetof(P, feature_count)];
    out.sort_order = load_le<int32_t>(p + offsetof(P, sort_order));
    out.price_paise = load_le<uint64_t>(p + offsetof(P, price_paise));
    size_t name_len = p[offsetof(P, name_len)];
    if (p[offsetof(P, popular)] > 1 || out.feature_count > KA_FEATURES_MAX ||
        len < head + name_len) {
        return DecodeStatus::kCorrupt;
    }
    out.name = view(p + head, name_len);
    out.features = view(p + head + name_len, len - head - name_len);
    return walk_packed(out.features, out.feature_count, KA_FEATURE_MAX_LEN,
                       [](std::string_view) { return false; })
               ? DecodeStatus::kOk
               : DecodeStatus::kCorrupt;
}

Entitlements effective_entitlements(const AccountRecordView &account,
                                    const PlanRecordView *plan) noexcept {
    Entitlements e{account.entitlement_rpm, account.max_keys, account.quota};
    if (plan == nullptr) return e;
    auto follows = [&](uint8_t override_bit, uint8_t states_bit) {
        return (account.overrides & override_bit) == 0 && (plan->states & states_bit) != 0;
    };
    if (follows(KA_OVERRIDE_RATE, KA_PLAN_STATES_RATE)) e.rate_rpm = plan->rate_rpm;
    if (follows(KA_OVERRIDE_MAX_KEYS, KA_PLAN_STATES_MAX_KEYS)) e.max_keys = plan->max_keys;
    if (follows(KA_OVERRIDE_QUOTA, KA_PLAN_STATES_QUOTA)) e.quota = plan->quota;
    return e;
}

std::string encode_fx_record(const FxRecord &rec) {
    using X = ka_fx_record_v1;
    std::string out(KA_FX_RECORD_SIZE, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(X, version), KA_FX_RECORD_V1);
    store_le<uint64_t>(p + offsetof(X, inr_per_usd_micro), rec.inr_per_usd_micro);
    store_le<int64_t>(p + offsetof(X, set_ms), rec.set_ms);
    return out;
}

DecodeStatus decode_fx_record(const void *data, size_t len, FxRecord &out) noexcept {
    using X = ka_fx_record_v1;
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) return DecodeStatus::kCorrupt;
    if (load_le<uint16_t>(p) != KA_FX_RECORD_V1) return DecodeStatus::kUnknownVersion;
    if (len != KA_FX_RECORD_SIZE) return DecodeStatus::kCorrupt;
    out.inr_per_usd_micro = load_le<uint64_t>(p + offsetof(X, inr_per_usd_micro));
    out.set_ms = load_le<int64_t>(p + offsetof(X, set_ms));
    return out.inr_per_usd_micro == 0 ? DecodeStatus::kCorrupt : DecodeStatus::kOk;
}

std::string encode_token_record(const TokenRecord &rec) {
    require(rec.expires_ms >= 0, "token expiry");
    std::string out(KA_TOKEN_RECORD_V2_SIZE, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(T, version), KA_TOKEN_RECORD_V2);
    std::memcpy(p + offsetof(T, account_id), rec.account_id.data(), KA_ID_LEN);
    store_le<int64_t>(p + offsetof(T2, expires_ms), rec.expires_ms);
    return out;
}

DecodeStatus decode_token_record(const void *data, size_t len, TokenRecord &out) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    const uint16_t version = load_le<uint16_t>(p);
    if (version != KA_TOKEN_RECORD_V1 && version != KA_TOKEN_RECORD_V2) {
        return DecodeStatus::kUnknownVersion;
    }
    if (len != (version == KA_TOKEN_RECORD_V1 ? KA_TOKEN_RECORD_SIZE : KA_TOKEN_RECORD_V2_SIZE)) {
        return DecodeStatus::kCorrupt;
    }
    std::memcpy(out.account_id.data(), p + offsetof(T, account_id), KA_ID_LEN);
    out.expires_ms = version == KA_TOKEN_RECORD_V1 ? 0 : load_le<int64_t>(p + offsetof(T2, expires_ms));
    return out.expires_ms < 0 ? DecodeStatus::kCorrupt : DecodeStatus::kOk;
}

}  // namespace keyauth
