// An older module against a grown schema (issue 48): a key record or an
// account record of a layout newer than the edge knows is refused as
// INVALID_API_KEY, logged as ours (KA_LOG_ERROR) naming the version, never
// read as another layout; every other key of the store still passes. This
// build plays the older module: the records claim the layout after its
// newest, in a store otherwise as its writers left it.
#include <gtest/gtest.h>

#include <string>

#include "edge_over_store.h"
#include "keyauth_core.h"
#include "le.h"
#include "records.h"
#include "store.h"

using namespace keyauth;

namespace {

class FutureLayoutTest : public keyauth::testing::EdgeOverStore {
protected:
    CreatedKey key_with_meta(const Id &acc, const std::string &name) {
        KeySpec spec{name, {"ip:read"}, 100, std::nullopt, {}};
        spec.meta = R"({"tier":"gold"})";  // layout 5: its slot sends the edge to the record
        return store.create_key(acc, spec);
    }
    Id account_with_meta(const std::string &name) {
        AccountChanges c;
        c.meta = R"({"crm":"c-1"})";  // layout 4
        return store.create_account(name, 600, c).account.id;
    }
    // Refused, as the edge's own problem, naming the version; the secret
    // nowhere in the reason.
    void expect_refused(const CreatedKey &k, unsigned version) {
        const ka_auth_result_t r = check(k.secret);
        EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID) << r.reason;
        EXPECT_EQ(r.log_level, KA_LOG_ERROR) << r.reason;
        EXPECT_NE(std::string(r.reason).find("unknown layout version " + std::to_string(version)), std::string::npos)
            << r.reason;
        EXPECT_EQ(std::string(r.reason).find(k.secret.substr(12)), std::string::npos) << r.reason;
    }
    void expect_passes(const CreatedKey &k) {
        const ka_auth_result_t r = check(k.secret);
        EXPECT_EQ(r.verdict, KA_AUTH_OK) << r.reason;
    }
};

}  // namespace

TEST_F(FutureLayoutTest, AKeyRecordOfANewerLayoutIsRefusedAndTheOtherKeysStillPass) {
    const Id acc = account_with_meta("acme");
    const CreatedKey grown = key_with_meta(acc, "grown");
    const CreatedKey sibling = key_with_meta(acc, "sibling");
    const CreatedKey plain = store.create_key(acc, "plain", {"ip:read"}, 100);  // inline in its slot
    for (const CreatedKey *k : {&grown, &sibling, &plain}) expect_passes(*k);  // and cached for the snapshot

    const unsigned next = KA_KEY_RECORD_V5 + 1;
    edit_behind_store(key_records(), grown.key.key_id.data(), KA_ID_LEN, [&](std::string &v) {
        KeyRecordView was;
        ASSERT_EQ(decode_key_record(v.data() + KA_HASH_LEN, v.size() - KA_HASH_LEN, was), DecodeStatus::kOk);
        ASSERT_EQ(was.version, KA_KEY_RECORD_V5);
        store_le<uint16_t>(reinterpret_cast<unsigned char *>(v.data() + KA_HASH_LEN), uint16_t(next));
    });
    expect_refused(grown, next);
    expect_passes(sibling);
    expect_passes(plain);
}

TEST_F(FutureLayoutTest, AnAccountRecordOfANewerLayoutRefusesItsKeysAndTheOtherAccountsPass) {
    const Id grown = account_with_meta("grown");
    const Id other = account_with_meta("other");
    const CreatedKey k1 = key_with_meta(grown, "k1");
    const CreatedKey k2 = store.create_key(grown, "k2", {"ip:read"}, 100);
    const CreatedKey k3 = key_with_meta(other, "k3");
    for (const CreatedKey *k : {&k1, &k2, &k3}) expect_passes(*k);  // the account cached for the snapshot

    const unsigned next = KA_ACCOUNT_RECORD_V4 + 1;
    edit_behind_store(accounts(), grown.data(), KA_ID_LEN, [&](std::string &v) {
        AccountRecordView was;
        ASSERT_EQ(decode_account_record(v.data(), v.size(), was), DecodeStatus::kOk);
        ASSERT_EQ(was.version, KA_ACCOUNT_RECORD_V4);
        store_le<uint16_t>(reinterpret_cast<unsigned char *>(v.data()), uint16_t(next));
    });
    expect_refused(k1, next);
    expect_refused(k2, next);
    expect_passes(k3);
}
