// The quota timer's sweep against a real store (#44): the credits of a key
// are released only once no key of its roll chain can be used again (the
// newest revoked, every predecessor past its grace); a key that merely
// expired keeps them (a new expiry may bring it back), and so does a chain
// with a predecessor still in its grace. Released credits free a slot, so
// the ledger of a deployment selling one-time keys does not fill.
#include <gtest/gtest.h>

#include <string>

#include "keyauth_core.h"
#include "quota_ledger.h"
#include "quota_period.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

class QuotaSweep : public ::testing::Test {
protected:
    TempDir dir;
    std::string db = dir.sub("db");
    int64_t now = 1796083200000;  // 2026-12-01T00:00:00Z
    Store store{db};
    ka_quota_ledger_t *ledger = nullptr;
    ka_edge_t *edge = nullptr;
    Id account{};

    void SetUp() override {
        store.set_clock([this] { return now; });
        account = store.create_account("seller", 6000).account.id;
        char err[256] = "";
        ledger = ka_quota_open(dir.sub("usage").c_str(), 64, err, sizeof err);
        ASSERT_NE(ledger, nullptr) << err;
        edge = ka_edge_open(db.c_str(), err, sizeof err);
        ASSERT_NE(edge, nullptr) << err;
    }
    void TearDown() override {
        ka_quota_close(ledger);
        ka_edge_close(edge);
    }

    KeyRecord credits_key(const std::string &name, Expiry expires = std::nullopt) {
        KeySpec spec;
        spec.name = name;
        spec.scopes = {"ip:read"};
        spec.requested_rpm = 60;
        spec.expires_at = expires;
        spec.quota = Quota{KA_QUOTA_TOTAL, 5};
        return store.create_key(account, spec).key;
    }
    // One call charged to the key's credits (under its chain's first id).
    void use(const KeyRecord &k) {
        ka_auth_result_t a{};
        a.verdict = KA_AUTH_OK;
        std::memcpy(a.key_id_bin, k.key_id.data(), KA_ID_LEN);
        std::memcpy(a.rate_id_bin, is_none(k.rate_id) ? k.key_id.data() : k.rate_id.data(), KA_ID_LEN);
        a.key_quota_period = KA_QUOTA_TOTAL;
        a.key_quota_units = 5;
        ka_quota_result_t q;
        ka_quota_check(ledger, &a, 1, now, &q);
        ASSERT_EQ(q.verdict, KA_QUOTA_ADMIT);
        ASSERT_EQ(ka_quota_charge(ledger, &a, &q, 1, 1, now), 1);
    }
    // A whole sweep at `now`: what it released.
    uint64_t sweep() {
        ka_quota_tend_t t{};
        for (int part = 0; part < 100 && !t.walked; part++) EXPECT_EQ(ka_quota_tend(ledger, edge, now, &t), 0);
        EXPECT_TRUE(t.walked);
        return t.released;
    }
    ka_quota_stats_t stats() {
        ka_quota_stats_t s;
        ka_quota_stats(ledger, &s);
        return s;
    }
};

}  // namespace

TEST_F(QuotaSweep, OnlyTheCreditsOfChainsThatCanNeverBeUsedAgainAreReleased) {
    const KeyRecord live = credits_key("live");
    const KeyRecord revoked = credits_key("revoked");
    const KeyRecord expiring = credits_key("expiring", now + 1000);
    const KeyRecord rolled = credits_key("rolled");
    for (const KeyRecord *k : {&live, &revoked, &expiring, &rolled}) use(*k);
    store.revoke_key(std::nullopt, revoked.key_id);
    const RolledKey roll = store.roll_key(std::nullopt, rolled.key_id, 60);
    store.revoke_key(std::nullopt, roll.successor.key.key_id);
    EXPECT_EQ(sweep(), 1u) << "the revoked key alone";
    EXPECT_EQ(stats().live, 3u);

    now += 2000;  // the expiring key has expired: a new expiry may revive it
    EXPECT_EQ(sweep(), 0u);
    now += 60000;  // the rolled key's grace is over, its successor revoked
    EXPECT_EQ(sweep(), 1u) << "the chain of the rolled key";
    EXPECT_EQ(stats().live, 2u) << "the live key and the expired one";
    EXPECT_EQ(sweep(), 0u) << "nothing released twice";
}

// A deployment selling one-time keys: far more keys than slots over time,
// each used then revoked; the ledger keeps its size.
TEST_F(QuotaSweep, OneTimeKeysUsedAndRevokedNeverFillTheLedger) {
    const uint64_t slots = stats().slots;
    for (int round = 0; round < 5; round++) {
        std::vector<KeyRecord> keys;
        for (int i = 0; i < 40; i++) keys.push_back(credits_key("once"));
        for (const KeyRecord &k : keys) use(k);
        for (const KeyRecord &k : keys) store.revoke_key(std::nullopt, k.key_id);
        EXPECT_EQ(sweep(), 40u) << round;
    }
    EXPECT_EQ(stats().slots, slots) << "200 one-time keys in a ledger of 64 slots: it never grew";
    EXPECT_EQ(stats().no_room, 0u);
}
