// A store written before key lifecycle (tests/fixtures/store-v1: every
// record in layout 1, made by keyauthctl of that time) still works: the
// edge authenticates its keys, the console reads them, and the first write
// converts what it touches to the new layouts.
#include <gtest/gtest.h>

#include "edge_store.h"
#include "key_slots_writer.h"
#include "keyauth_core.h"
#include "keyauth_schema.h"
#include "store.h"
#include "store_fixture.h"
#include "store_layout.h"

using namespace keyauth;
using keyauth::testing::expect_schema_three;

namespace {

class StoreUpgradeTest : public keyauth::testing::StoreFixture {
protected:
    StoreUpgradeTest() : StoreFixture("store-v1") {}
    Id account{}, active{}, revoked{};

    void SetUp() override {
        StoreFixture::SetUp();
        ASSERT_TRUE(parse_id(kAccountIdPrefix, fixture["account"]["id"].get<std::string>(), account));
        ASSERT_TRUE(parse_id(kKeyIdPrefix, fixture["activeKey"]["id"].get<std::string>(), active));
        ASSERT_TRUE(parse_id(kKeyIdPrefix, fixture["revokedKey"]["id"].get<std::string>(), revoked));
    }
};

}  // namespace

TEST_F(StoreUpgradeTest, TheEdgeAuthenticatesLayoutOneKeys) {
    ka_auth_result_t r;
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"], &r), KA_AUTH_OK) << r.reason;
    EXPECT_EQ(0, std::memcmp(r.rate_id_bin, active.data(), KA_ID_LEN));  // its own state
    EXPECT_EQ(r.requested_rpm, 120u);
    EXPECT_EQ(r.entitlement_rpm, 600u);
    EXPECT_EQ(edge_verdict(fixture["revokedKey"]["secret"]), KA_AUTH_KEY_INVALID);
}

TEST_F(StoreUpgradeTest, TheStoreReadsAndWritesOverLayoutOneRecords) {
    Store store(path);
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"]), KA_AUTH_OK);
    auto acc = store.find_account(account);
    ASSERT_TRUE(acc);
    EXPECT_EQ(acc->record.name, "Fixture One");
    EXPECT_EQ(acc->record.max_keys, KA_DEFAULT_MAX_KEYS);
    EXPECT_EQ(acc->record.live_keys, KA_LIVE_KEYS_UNKNOWN);
    EXPECT_EQ(store.account_for_console_token(fixture["account"]["consoleToken"].get<std::string>()), account);

    KeyPage page = store.list_keys(account, 10, std::nullopt);
    ASSERT_EQ(page.keys.size(), 2u);
    EXPECT_EQ(page.keys[0].key_id, active);
    EXPECT_EQ(page.keys[0].scopes, (std::vector<std::string>{"ip:read", "dns:*"}));
    EXPECT_EQ(page.keys[1].status, KA_KEY_REVOKED);
    EXPECT_EQ(store.list_plans().size(), 10u);

    // The first key made counts the account's keys (one not revoked) and
    // writes the account in layout 2.
    store.create_key(account, "new", {"ip:read"}, 60);
    EXPECT_EQ(store.find_account(account)->record.live_keys, 2u);
    // A layout-1 key can be updated and rolled; the roll keeps its state.
    KeyChanges rename;
    rename.name = "renamed";
    EXPECT_EQ(store.update_key(account, active, rename).name, "renamed");
    RolledKey rolled = store.roll_key(account, active, 60);
    EXPECT_EQ(rolled.successor.key.rate_id, active);
    ka_auth_result_t r;
    EXPECT_EQ(edge_verdict(rolled.successor.secret, &r), KA_AUTH_OK) << r.reason;
    EXPECT_EQ(0, std::memcmp(r.rate_id_bin, active.data(), KA_ID_LEN));
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"]), KA_AUTH_OK);  // in its grace
    // The old console token (layout 1) still signs in, until rotated.
    CreatedAccount rotated = store.rotate_console_token(account, 0);
    EXPECT_FALSE(store.account_for_console_token(fixture["account"]["consoleToken"].get<std::string>()));
    EXPECT_EQ(store.account_for_console_token(rotated.console_token), account);
}

TEST_F(StoreUpgradeTest, TheFirstWriterMovesASchemaOneStoreToSchemaThree) {
    {
        std::string err;
        auto before = EdgeStore::open(path, err);
        ASSERT_TRUE(before) << err;
        EXPECT_EQ(before->schema_at_open(), 1u);  // read through keys_by_hash
    }
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"]), KA_AUTH_OK);  // this edge stays open
    {
        Store store(path);  // opening is the upgrade
        store.create_key(account, "new", {"ip:read"}, 60);
    }
    expect_schema_three(path, 3);

    // the edge opened on schema 1 follows the store it now reads
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"]), KA_AUTH_OK);
    EXPECT_EQ(edge_verdict(fixture["revokedKey"]["secret"]), KA_AUTH_KEY_INVALID);
    std::string err;
    auto after = EdgeStore::open(path, err);
    ASSERT_TRUE(after) << err;
    EXPECT_EQ(after->schema_at_open(), 3u);
}
