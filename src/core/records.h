// Codecs of the schema v1 records (lmdb_schema/keyauth_schema.h). Decoding
// yields views into the caller's bytes and never allocates: the edge decodes
// straight out of LMDB's map inside a read transaction. Encoding is for the
// admin tools and validates every bound the readers rely on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "keyauth_schema.h"

namespace keyauth {

enum class DecodeStatus { kOk, kUnknownVersion, kCorrupt };

// A quota as records hold it: KA_QUOTA_NONE (units 0) is no quota.
struct Quota {
    uint8_t period = KA_QUOTA_NONE;  // enum ka_quota_period
    uint64_t units = 0;

    bool none() const noexcept { return period == KA_QUOTA_NONE; }
    bool operator==(const Quota &o) const noexcept {
        return period == o.period && units == o.units;
    }
    bool operator!=(const Quota &o) const noexcept { return !(*this == o); }
};

// True if q is a quota a record may hold: NONE with 0 units, or a period
// with 1..KA_QUOTA_UNITS_MAX units (TOTAL only where total_ok).
bool quota_ok(const Quota &q, bool total_ok) noexcept;

struct KeyRecord {
    uint8_t status = KA_KEY_ACTIVE;
    uint32_t requested_rpm = 0;
    Id key_id{};
    Id account_id{};
    int64_t created_ms = 0;
    int64_t revoked_ms = 0;
    int64_t expires_ms = 0;
    std::vector<std::string> scopes;
    std::string prefix;
    std::string name;
    // Roll chain (layout 2); zero ids mean none. rate_id zero: the key's own.
    Id rate_id{};
    Id rolled_from{};
    Id rolled_to{};
    // The key's own quota (layout 3); none: only the account's applies.
    Quota quota;
    // Its quota was set by an operator (layout 4): the console may not lift it.
    bool quota_managed = false;
    // Layout 5: allowedIps packed (ip_allowlist.h; empty: any address) and
    // meta, a JSON object handed on (empty: none).
    std::string allowed_ips{};
    std::string meta{};
};

inline bool is_none(const Id &id) { return id == Id{}; }

struct KeyRecordView {
    uint16_t version = 0;  // set even when the version is unknown
    uint8_t status = 0;
    uint8_t scope_count = 0;
    uint32_t requested_rpm = 0;
    const unsigned char *key_id = nullptr;
    const unsigned char *account_id = nullptr;
    int64_t created_ms = 0;
    int64_t revoked_ms = 0;
    int64_t expires_ms = 0;
    std::string_view scopes;  // packed (u8 length, bytes) entries
    std::string_view prefix;
    std::string_view name;
    // Whose rate-limit state the key spends (layout 1: its own id).
    const unsigned char *rate_id = nullptr;
    // Layout 2's chain ids; null in layout 1 (none).
    const unsigned char *rolled_from = nullptr;
    const unsigned char *rolled_to = nullptr;
    Quota quota;  // layouts 3, 4 and 5
    bool quota_managed = false;  // layouts 4 and 5
    std::string_view allowed_ips;  // layout 5: packed entries; empty: any address
    std::string_view meta;         // layout 5: empty: none

    // True if any granted scope grants `required`.
    bool grants(std::string_view required) const noexcept;
    KeyRecord to_owned() const;
};

// True if packed (u8 length, bytes) scope entries tile `packed` exactly into
// `count` scopes of 1..KA_SCOPE_MAX_LEN bytes.
bool packed_scopes_ok(std::string_view packed, size_t count) noexcept;

// Throws std::invalid_argument naming the violated bound.
std::string encode_key_record(const KeyRecord &rec);
DecodeStatus decode_key_record(const void *data, size_t len, KeyRecordView &out) noexcept;

struct AccountRecord {
    uint8_t status = KA_ACCOUNT_ACTIVE;
    uint32_t entitlement_rpm = 0;
    int64_t created_ms = 0;
    std::string name;
    uint32_t max_keys = KA_DEFAULT_MAX_KEYS;
    uint32_t live_keys = 0;                  // or KA_LIVE_KEYS_UNKNOWN
    std::vector<std::string> allowed_scopes;  // empty: any scope
    // Layout 3: the plan (empty: none), which of the values above (and the
    // quota) the account states itself, and its own quota.
    std::string plan_id;
    uint8_t overrides = KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA;
    Quota quota;
    // Layout 4: as a key's (layout 5).
    std::string allowed_ips{};
    std::string meta{};
};

struct AccountRecordView {
    uint16_t version = 0;
    uint8_t status = 0;
    uint32_t entitlement_rpm = 0;
    int64_t created_ms = 0;
    std::string_view name;
    uint32_t max_keys = KA_DEFAULT_MAX_KEYS;
    uint32_t live_keys = KA_LIVE_KEYS_UNKNOWN;
    uint8_t allowed_scope_count = 0;
    std::string_view allowed_scopes;  // packed (u8 length, bytes) entries
    // Layouts 1 and 2 read as no plan, every value the account's own.
    std::string_view plan_id;
    uint8_t overrides = KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA;
    Quota quota;
    std::string_view allowed_ips;  // layout 4
    std::string_view meta;         // layout 4

    AccountRecord to_owned() const;
};

std::string encode_account_record(const AccountRecord &rec);
DecodeStatus decode_account_record(const void *data, size_t len, AccountRecordView &out) noexcept;

struct PlanRecord {
    std::string id;
    std::string name;
    uint64_t price_paise = 0;
    std::vector<std::string> features;
    bool popular = false;
    int32_t sort_order = 0;
    // What the plan entitles an account to (layout 2): the values whose
    // KA_PLAN_STATES_* bit is set in `states`.
    uint8_t states = 0;
    uint32_t rate_rpm = 0;
    uint32_t max_keys = 0;
    Quota quota;
};

struct PlanRecordView {
    uint16_t version = 0;
    bool popular = false;
    uint8_t feature_count = 0;
    int32_t sort_order = 0;
    uint64_t price_paise = 0;
    std::string_view name;
    std::string_view features;  // packed (u8 length, bytes) entries
    uint8_t states = 0;         // layout 1: states nothing
    uint32_t rate_rpm = 0;
    uint32_t max_keys = 0;
    Quota quota;

    std::vector<std::string_view> feature_list() const;  // not for the hot path
    PlanRecord to_owned(std::string_view id) const;
};

// The plan id is the LMDB key, not part of the value.
std::string encode_plan_record(const PlanRecord &rec);
DecodeStatus decode_plan_record(const void *data, size_t len, PlanRecordView &out) noexcept;

struct FxRecord {
    uint64_t inr_per_usd_micro = 0;
    int64_t set_ms = 0;
};

// An account's effective values: its own where it overrides them or its plan
// does not state them (or it has none), else its plan's.
struct Entitlements {
    uint32_t rate_rpm = 0;
    uint32_t max_keys = 0;
    Quota quota;
};
Entitlements effective_entitlements(const AccountRecordView &account,
                                    const PlanRecordView *plan) noexcept;

std::string encode_fx_record(const FxRecord &rec);
DecodeStatus decode_fx_record(const void *data, size_t len, FxRecord &out) noexcept;

struct TokenRecord {
    Id account_id{};
    int64_t expires_ms = 0;  // 0: the account's current token
};

std::string encode_token_record(const TokenRecord &rec);
DecodeStatus decode_token_record(const void *data, size_t len, TokenRecord &out) noexcept;

}  // namespace keyauth
