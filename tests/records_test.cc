#include "records.h"

#include <gtest/gtest.h>

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
}

TEST(KeyRecord, LayoutIsLittleEndianAtTheDocumentedOffsets) {
    std::string bytes = encode_key_record(sample_key());
    auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    EXPECT_EQ(p[0], 1);  // version, LE
    EXPECT_EQ(p[1], 0);
    EXPECT_EQ(p[2], KA_KEY_ACTIVE);
    EXPECT_EQ(p[3], 2);  // scope count
    EXPECT_EQ(load_le<uint32_t>(p + 4), 1234u);
    EXPECT_EQ(p[8], 1);       // key id
    EXPECT_EQ(p[20], 0xa0);   // account id
    EXPECT_EQ(load_le<int64_t>(p + 32), 1'700'000'000'123);
    EXPECT_EQ(p[64], 7);  // first scope length
    EXPECT_EQ(bytes.substr(65, 7), "ip:read");
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
    bytes[0] = 2;
    KeyRecordView v;
    EXPECT_EQ(decode_key_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
    EXPECT_EQ(v.version, 2);
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
    b[64] = 60;  // a scope length running past the scope area
    EXPECT_EQ(decode_key_record(b.data(), b.size(), v), DecodeStatus::kCorrupt);
    b = good;
    b[64] = 0;  // empty scope
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
    AccountRecord a{KA_ACCOUNT_SUSPENDED, 600, 42, "Acme"};
    std::string bytes = encode_account_record(a);
    ASSERT_EQ(bytes.size(), KA_ACCOUNT_RECORD_HEAD + 4);
    AccountRecordView v;
    ASSERT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    EXPECT_EQ(v.status, KA_ACCOUNT_SUSPENDED);
    EXPECT_EQ(v.entitlement_rpm, 600u);
    EXPECT_EQ(v.created_ms, 42);
    EXPECT_EQ(v.name, "Acme");
    bytes[0] = 5;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
    bytes[0] = 1;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size() - 1, v), DecodeStatus::kCorrupt);
    EXPECT_EQ(decode_account_record(bytes.data(), 1, v), DecodeStatus::kCorrupt);
}

// Found by fuzz_records: a name longer than any writer may store decoded as
// valid, and re-encoding it threw.
TEST(AccountRecord, OverlongNameIsCorrupt) {
    AccountRecord a{KA_ACCOUNT_ACTIVE, 600, 42, std::string(KA_NAME_MAX_LEN, 'n')};
    std::string bytes = encode_account_record(a) + std::string(KA_ACCOUNT_RECORD_HEAD, 'x');
    bytes[3] = static_cast<char>(KA_NAME_MAX_LEN + 1);  // name_len 201
    bytes.resize(KA_ACCOUNT_RECORD_HEAD + KA_NAME_MAX_LEN + 1);
    AccountRecordView v;
    EXPECT_EQ(decode_account_record(bytes.data(), bytes.size(), v), DecodeStatus::kCorrupt);
}

TEST(TokenRecord, RoundTripAndVersion) {
    Id id{};
    id[0] = 9;
    id[11] = 7;
    std::string bytes = encode_token_record(id);
    Id back{};
    ASSERT_EQ(decode_token_record(bytes.data(), bytes.size(), back), DecodeStatus::kOk);
    EXPECT_EQ(back, id);
    EXPECT_EQ(decode_token_record(bytes.data(), bytes.size() - 1, back), DecodeStatus::kCorrupt);
    bytes[0] = 3;
    EXPECT_EQ(decode_token_record(bytes.data(), bytes.size(), back), DecodeStatus::kUnknownVersion);
}
