#include "records.h"

#include <gtest/gtest.h>

#include <cstring>

#include "keyauth_schema.h"
#include "le.h"

using namespace keyauth;

namespace {

KeyRecord sample_key() {
    KeyRecord r;
    r.status = KA_KEY_ACTIVE;
    r.requested_rpm = 1234;
    for (size_t i = 0; i < KA_ID_LEN; i++) {
        r.key_id[i] = static_cast<unsigned char>(i + 1);
        r.account_id[i] = static_cast<unsigned char>(0xa0 + i);
    }
    r.created_ms = 1'700'000'000'123;
    r.revoked_ms = 0;
    r.expires_ms = 1'800'000'000'000;
    r.scopes = {"ip:read", "geo:*"};
    r.prefix = "ka_AbCdEfGhI";
    r.name = "production — ünïcode";
    return r;
}

// The layout-1 bytes of a record: what writers before key lifecycle stored.
std::string layout_one(const std::string &v2) {
    std::string v1 = v2.substr(0, KA_KEY_RECORD_HEAD) + v2.substr(KA_KEY_RECORD_V2_HEAD);
    v1[0] = 1;
    return v1;
}

}  // namespace

TEST(KeyRecord, RoundTrip) {
    KeyRecord r = sample_key();
    std::string bytes = encode_key_record(r);
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    KeyRecord back = v.to_owned();
    EXPECT_EQ(back.status, r.status);
    EXPECT_EQ(back.requested_rpm, r.requested_rpm);
    EXPECT_EQ(back.key_id, r.key_id);
    EXPECT_EQ(back.account_id, r.account_id);
    EXPECT_EQ(back.created_ms, r.created_ms);
    EXPECT_EQ(back.revoked_ms, r.revoked_ms);
    EXPECT_EQ(back.expires_ms, r.expires_ms);
    EXPECT_EQ(back.scopes, r.scopes);
    EXPECT_EQ(back.prefix, r.prefix);
    EXPECT_EQ(back.name, r.name);
    EXPECT_TRUE(is_none(back.rate_id));
    EXPECT_TRUE(is_none(back.rolled_from));
    EXPECT_TRUE(is_none(back.rolled_to));
    EXPECT_EQ(0, std::memcmp(v.rate_id, r.key_id.data(), KA_ID_LEN));  // its own state
}

TEST(KeyRecord, RollChainRoundTrips) {
    KeyRecord r = sample_key();
    r.rate_id[0] = 0x11;
    r.rolled_from[0] = 0x22;
    r.rolled_to[11] = 0x33;
    std::string bytes = encode_key_record(r);
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.rate_id[0], 0x11);
    KeyRecord back = v.to_owned();
    EXPECT_EQ(back.rate_id, r.rate_id);
    EXPECT_EQ(back.rolled_from, r.rolled_from);
    EXPECT_EQ(back.rolled_to, r.rolled_to);
}

TEST(KeyRecord, LayoutOneStillReads) {
    KeyRecord r = sample_key();
    std::string v1 = layout_one(encode_key_record(r));
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(v1.data(), v1.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V1);
    EXPECT_EQ(0, std::memcmp(v.rate_id, r.key_id.data(), KA_ID_LEN));
    EXPECT_TRUE(v.grants("ip:read"));
    KeyRecord back = v.to_owned();
    EXPECT_EQ(back.name, r.name);
    EXPECT_EQ(back.scopes, r.scopes);
    EXPECT_EQ(back.expires_ms, r.expires_ms);
    EXPECT_TRUE(is_none(back.rolled_from) && is_none(back.rolled_to) && is_none(back.rate_id));
    for (size_t n = 0; n < v1.size(); n++)
        EXPECT_EQ(decode_key_record(v1.data(), n, v), DecodeStatus::kCorrupt) << n;
}

TEST(KeyRecord, LayoutIsLittleEndianAtTheDocumentedOffsets) {
    std::string bytes = encode_key_record(sample_key());
    auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    EXPECT_EQ(p[0], 2);  // version, LE
    EXPECT_EQ(p[1], 0);
    EXPECT_EQ(p[2], KA_KEY_ACTIVE);
    EXPECT_EQ(p[3], 2);  // scope count
    EXPECT_EQ(load_le<uint32_t>(p + 4), 1234u);
    EXPECT_EQ(p[8], 1);       // key id
    EXPECT_EQ(p[20], 0xa0);   // account id
    EXPECT_EQ(load_le<int64_t>(p + 32), 1'700'000'000'123);
    EXPECT_EQ(p[64], 1);  // rate id: the key's own
    EXPECT_EQ(p[76], 0);  // rolled from: none
    EXPECT_EQ(p[104], 7);  // first scope length
    EXPECT_EQ(bytes.substr(105, 7), "ip:read");
}

TEST(KeyRecord, GrantsFollowTheScopeRules) {
    std::string bytes = encode_key_record(sample_key());
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_TRUE(v.grants("ip:read"));
    EXPECT_TRUE(v.grants("geo:lookup"));
    EXPECT_FALSE(v.grants("ip:write"));
    EXPECT_FALSE(v.grants("asn:read"));
}

TEST(KeyRecord, UnknownVersionIsReportedWithTheVersion) {
    std::string bytes = encode_key_record(sample_key());
    bytes[0] = 6;  // the first layout after 5
    KeyRecordView v;
    EXPECT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
    EXPECT_EQ(v.version, 6);
    bytes[0] = 0;
    bytes[1] = 1;  // 256: byte order matters
    EXPECT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
    EXPECT_EQ(v.version, 256);
}

TEST(KeyRecord, EveryTruncationIsCorrupt) {
    std::string bytes = encode_key_record(sample_key());
    for (size_t n = 0; n < bytes.size(); n++) {
        KeyRecordView v;
        EXPECT_EQ(decode_key_record(bytes.data(), n, v), DecodeStatus::kCorrupt) << n;
    }
}

TEST(KeyRecord, TrailingBytesAreCorrupt) {
    std::string bytes = encode_key_record(sample_key()) + "x";
    KeyRecordView v;
    EXPECT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kCorrupt);
}

TEST(KeyRecord, InconsistentTailIsCorrupt) {
    const std::string good = encode_key_record(sample_key());
    KeyRecordView v;
    std::string b = good;
    b[2] = 9;  // status
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[3] = 3;  // more scopes than stored
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[3] = 1;  // fewer scopes than stored
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[104] = 60;  // a scope length running past the scope area
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[104] = 0;  // empty scope
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[58] = static_cast<char>(b[58] + 1);  // prefix length
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
}

TEST(KeyRecord, EncoderEnforcesTheBounds) {
    KeyRecord r = sample_key();
    r.scopes.assign(KA_SCOPES_MAX + 1, "a:b");
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
    r = sample_key();
    r.scopes = {std::string(KA_SCOPE_MAX_LEN + 1, 'a')};
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
    r = sample_key();
    r.name = std::string(KA_NAME_MAX_LEN + 1, 'n');
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
    r = sample_key();
    r.status = 7;
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
}

TEST(KeyRecord, LargestRecordRoundTrips) {
    KeyRecord r = sample_key();
    r.scopes.clear();
    for (size_t i = 0; i < KA_SCOPES_MAX; i++) r.scopes.push_back(std::string(KA_SCOPE_MAX_LEN, 'a' + i % 26));
    r.name = std::string(KA_NAME_MAX_LEN, 'n');
    std::string bytes = encode_key_record(r);
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.to_owned().scopes, r.scopes);
}

TEST(AccountRecord, RoundTripAndVersion) {
    AccountRecord a{KA_ACCOUNT_SUSPENDED, 600, 42, "Acme", 7, 3, {"ip:read", "dns:*"},
                    "basic-1k", KA_OVERRIDE_RATE, Quota{KA_QUOTA_DAY, 500}};
    std::string bytes = encode_account_record(a);
    ASSERT_EQ(bytes.size(), KA_ACCOUNT_RECORD_V3_HEAD + 4 + 1 + 7 + 1 + 5 + 8);
    AccountRecordView v;
    ASSERT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_ACCOUNT_RECORD_V3);
    EXPECT_EQ(v.plan_id, "basic-1k");
    EXPECT_EQ(v.overrides, KA_OVERRIDE_RATE);
    EXPECT_EQ(v.quota, (Quota{KA_QUOTA_DAY, 500}));
    EXPECT_EQ(v.status, KA_ACCOUNT_SUSPENDED);
    EXPECT_EQ(v.entitlement_rpm, 600u);
    EXPECT_EQ(v.created_ms, 42);
    EXPECT_EQ(v.name, "Acme");
    AccountRecord back = v.to_owned();
    EXPECT_EQ(back.max_keys, 7u);
    EXPECT_EQ(back.live_keys, 3u);
    EXPECT_EQ(back.allowed_scopes, a.allowed_scopes);
    bytes[0] = 5;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
    bytes[0] = 2;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size() - 1, v), DecodeStatus::kCorrupt);
    EXPECT_EQ(decode_account_record(bytes.data(), 1, v), DecodeStatus::kCorrupt);
    a.max_keys = 0;
    EXPECT_THROW(encode_account_record(a), std::invalid_argument);
}

// Layout 1, as stores written before account controls hold it: the default
// cap, any scope, and a live-key count still to be made.
TEST(AccountRecord, LayoutOneStillReads) {
    std::string v1(KA_ACCOUNT_RECORD_HEAD, '\0');
    v1[0] = 1;
    v1[2] = KA_ACCOUNT_ACTIVE;
    v1[3] = 4;
    v1[4] = static_cast<char>(0x58);  // 600 = 0x0258
    v1[5] = 0x02;
    v1[8] = 42;
    v1 += "Acme";
    AccountRecordView v;
    ASSERT_EQ(decode_account_record(v1.data(), v1.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_ACCOUNT_RECORD_V1);
    EXPECT_EQ(v.entitlement_rpm, 600u);
    EXPECT_EQ(v.created_ms, 42);
    EXPECT_EQ(v.name, "Acme");
    EXPECT_EQ(v.max_keys, KA_DEFAULT_MAX_KEYS);
    EXPECT_EQ(v.live_keys, KA_LIVE_KEYS_UNKNOWN);
    EXPECT_TRUE(v.to_owned().allowed_scopes.empty());
    EXPECT_EQ(decode_account_record(v1.data(), v1.size() - 1, v), DecodeStatus::kCorrupt);
}

// Found by fuzz_records: a name longer than any writer may store decoded as
// valid, and re-encoding it threw.
TEST(AccountRecord, OverlongNameIsCorrupt) {
    AccountRecord a{KA_ACCOUNT_ACTIVE, 600, 42, std::string(KA_NAME_MAX_LEN, 'n'), 10, 0, {}, "", 0, {}};
    std::string bytes = encode_account_record(a) + std::string(KA_ACCOUNT_RECORD_V3_HEAD, 'x');
    bytes[3] = static_cast<char>(KA_NAME_MAX_LEN + 1);  // name_len 201
    bytes.resize(KA_ACCOUNT_RECORD_V3_HEAD + KA_NAME_MAX_LEN + 1);
    AccountRecordView v;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kCorrupt);
}

// Quotas: what a record may hold, and what every reader refuses.
TEST(Quota, BoundsAndPeriods) {
    EXPECT_TRUE(quota_ok(Quota{}, false));
    EXPECT_FALSE(quota_ok(Quota{KA_QUOTA_NONE, 1}, false));
    EXPECT_TRUE(quota_ok(Quota{KA_QUOTA_DAY, 1}, false));
    EXPECT_TRUE(quota_ok(Quota{KA_QUOTA_MONTH, KA_QUOTA_UNITS_MAX}, false));
    EXPECT_FALSE(quota_ok(Quota{KA_QUOTA_MONTH, KA_QUOTA_UNITS_MAX + 1}, false));
    EXPECT_FALSE(quota_ok(Quota{KA_QUOTA_DAY, 0}, false));
    EXPECT_FALSE(quota_ok(Quota{KA_QUOTA_TOTAL, 1}, false));
    EXPECT_TRUE(quota_ok(Quota{KA_QUOTA_TOTAL, 1}, true));
    EXPECT_FALSE(quota_ok(Quota{4, 1}, true));
}

TEST(KeyRecord, OwnQuotaIsLayoutThree) {
    KeyRecord r;
    r.key_id[11] = 1;
    r.account_id[11] = 2;
    r.prefix = "ka_abcdefghi";
    r.name = "one-time";
    r.scopes = {"ip:read"};
    EXPECT_EQ(load_le<uint16_t>(reinterpret_cast<const unsigned char *>(encode_key_record(r).data())),
              KA_KEY_RECORD_V2);
    r.quota = Quota{KA_QUOTA_TOTAL, 1};
    std::string bytes = encode_key_record(r);
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V3);
    EXPECT_EQ(v.quota, (Quota{KA_QUOTA_TOTAL, 1}));
    EXPECT_EQ(v.name, "one-time");
    EXPECT_EQ(v.to_owned().quota, r.quota);
    bytes[offsetof(ka_key_record_v3, quota_period)] = KA_QUOTA_NONE;  // layout 3 without a quota
    EXPECT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kCorrupt);
    r.quota = Quota{KA_QUOTA_DAY, 0};
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
}

// A quota an operator set is marked managed (issue 44): layout 4, the v3
// head with the flag in its first reserved byte; a layout 3 reader refuses
// it (unknown version) instead of losing the mark.
TEST(KeyRecord, AManagedQuotaIsLayoutFour) {
    KeyRecord r = sample_key();
    r.quota = Quota{KA_QUOTA_TOTAL, 2};
    r.quota_managed = true;
    std::string bytes = encode_key_record(r);
    EXPECT_EQ(bytes.size(), KA_KEY_RECORD_V4_HEAD + (1 + 7) + (1 + 5) + r.prefix.size() + r.name.size());
    KeyRecordView v;
    ASSERT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V4);
    EXPECT_EQ(v.quota, (Quota{KA_QUOTA_TOTAL, 2}));
    EXPECT_TRUE(v.quota_managed);
    EXPECT_EQ(v.name, r.name);
    KeyRecord back = v.to_owned();
    EXPECT_TRUE(back.quota_managed);
    EXPECT_EQ(encode_key_record(back), bytes);
    EXPECT_EQ(static_cast<unsigned char>(bytes[offsetof(ka_key_record_v4, quota_flags)]), KA_KEY_QUOTA_MANAGED);
    // the same key unmanaged is layout 3, byte for byte but the version and the flag
    r.quota_managed = false;
    std::string v3 = encode_key_record(r);
    ASSERT_EQ(decode_key_record(v3.data(), v3.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_KEY_RECORD_V3);
    EXPECT_FALSE(v.quota_managed);
    // a flag unknown or missing is corrupt, as is a managed mark with no quota
    for (unsigned char flags : {0, 2, 3, 0x80}) {
        std::string bad = bytes;
        bad[offsetof(ka_key_record_v4, quota_flags)] = static_cast<char>(flags);
        EXPECT_EQ(decode_key_record(bad.data(), bad.size(), v), DecodeStatus::kCorrupt) << int(flags);
    }
    r.quota = Quota{};
    r.quota_managed = true;
    EXPECT_THROW(encode_key_record(r), std::invalid_argument);
}

TEST(PlanRecord, EntitlementsRoundTripAndBounds) {
    PlanRecord p;
    p.id = "basic-1k";
    p.name = "Basic";
    p.price_paise = 49900;
    p.features = {"1,000 pages"};
    p.states = KA_PLAN_STATES_RATE | KA_PLAN_STATES_QUOTA;
    p.rate_rpm = 120;
    p.quota = Quota{KA_QUOTA_MONTH, 1000};
    std::string bytes = encode_plan_record(p);
    PlanRecordView v;
    ASSERT_EQ(decode_plan_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.version, KA_PLAN_RECORD_V2);
    EXPECT_EQ(v.states, p.states);
    EXPECT_EQ(v.rate_rpm, 120u);
    EXPECT_EQ(v.max_keys, 0u);
    EXPECT_EQ(v.quota, p.quota);
    EXPECT_EQ(v.name, "Basic");
    EXPECT_EQ(v.feature_list().size(), 1u);
    // A rate stated as 0, a cap not stated but set, a total quota: refused.
    PlanRecord bad = p;
    bad.rate_rpm = 0;
    EXPECT_THROW(encode_plan_record(bad), std::invalid_argument);
    bad = p;
    bad.max_keys = 3;
    EXPECT_THROW(encode_plan_record(bad), std::invalid_argument);
    bad = p;
    bad.quota = Quota{KA_QUOTA_TOTAL, 10};
    EXPECT_THROW(encode_plan_record(bad), std::invalid_argument);
    bytes[offsetof(ka_plan_record_v2, quota_period)] = 9;
    EXPECT_EQ(decode_plan_record(bytes.data(), bytes.size(), v), DecodeStatus::kCorrupt);
}

// The account's own value wins where it overrides or the plan is silent.
TEST(Entitlements, PlanValuesUnlessTheAccountOverrides) {
    AccountRecord a{KA_ACCOUNT_ACTIVE, 600, 1, "a", 5, 0, {}, "basic-1k", 0,
                    Quota{KA_QUOTA_DAY, 7}};
    std::string ab = encode_account_record(a);
    AccountRecordView av;
    ASSERT_EQ(decode_account_record(ab.data(), ab.size(), av), DecodeStatus::kOk);
    PlanRecord p;
    p.name = "Basic";
    p.states = KA_PLAN_STATES_RATE | KA_PLAN_STATES_QUOTA;
    p.rate_rpm = 120;
    p.quota = Quota{KA_QUOTA_MONTH, 1000};
    std::string pb = encode_plan_record(p);
    PlanRecordView pv;
    ASSERT_EQ(decode_plan_record(pb.data(), pb.size(), pv), DecodeStatus::kOk);

    Entitlements e = effective_entitlements(av, &pv);
    EXPECT_EQ(e.rate_rpm, 120u);
    EXPECT_EQ(e.max_keys, 5u);  // the plan does not state a cap
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_MONTH, 1000}));
    av.overrides = KA_OVERRIDE_RATE | KA_OVERRIDE_QUOTA;
    e = effective_entitlements(av, &pv);
    EXPECT_EQ(e.rate_rpm, 600u);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_DAY, 7}));
    av.overrides = 0;
    e = effective_entitlements(av, nullptr);  // no plan, or the plan is gone
    EXPECT_EQ(e.rate_rpm, 600u);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_DAY, 7}));
}

TEST(TokenRecord, RoundTripAndVersion) {
    Id id{};
    id[0] = 9;
    id[11] = 7;
    std::string bytes = encode_token_record(TokenRecord{id, 1234});
    TokenRecord back;
    ASSERT_EQ(decode_token_record(bytes.data(), bytes.size(), back), DecodeStatus::kOk);
    EXPECT_EQ(back.account_id, id);
    EXPECT_EQ(back.expires_ms, 1234);
    EXPECT_EQ(decode_token_record(bytes.data(), bytes.size() - 1, back), DecodeStatus::kCorrupt);
    // Layout 1 (16 bytes, no expiry) still reads: a token that never expires.
    std::string v1 = bytes.substr(0, KA_TOKEN_RECORD_SIZE);
    v1[0] = 1;
    ASSERT_EQ(decode_token_record(v1.data(), v1.size(), back), DecodeStatus::kOk);
    EXPECT_EQ(back.account_id, id);
    EXPECT_EQ(back.expires_ms, 0);
    bytes[0] = 3;
    EXPECT_EQ(decode_token_record(bytes.data(), bytes.size(), back), DecodeStatus::kUnknownVersion);
}
