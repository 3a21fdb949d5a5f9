// A store written before key lifecycle (tests/fixtures/store-v1: every
// record in layout 1, made by keyauthctl of that time) still works: the
// edge authenticates its keys, the console reads them, and the first write
// converts what it touches to the new layouts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <lmdb.h>

#include <filesystem>
#include <fstream>

#include "edge_store.h"
#include "key_slots_writer.h"
#include "keyauth_core.h"
#include "keyauth_schema.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

class StoreUpgradeTest : public ::testing::Test {
protected:
    TempDir dir;
    std::string path = dir.sub("db");
    nlohmann::json fixture;
    Id account{}, active{}, revoked{};

    void SetUp() override {
        std::filesystem::create_directory(path);
        std::filesystem::copy_file("tests/fixtures/store-v1/data.mdb", path + "/data.mdb");
        std::filesystem::permissions(path + "/data.mdb", std::filesystem::perms::owner_read |
                                                             std::filesystem::perms::owner_write);
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        std::ifstream in("tests/fixtures/store-v1/fixture.json");
        fixture = nlohmann::json::parse(in);
        ASSERT_TRUE(parse_id(kAccountIdPrefix, fixture["account"]["id"].get<std::string>(), account));
        ASSERT_TRUE(parse_id(kKeyIdPrefix, fixture["activeKey"]["id"].get<std::string>(), active));
        ASSERT_TRUE(parse_id(kKeyIdPrefix, fixture["revokedKey"]["id"].get<std::string>(), revoked));
    }

    // One edge for the test, opened once: closing an environment drops
    // the process's locks on its lock file, under any other handle too.
    ka_edge_t *edge = nullptr;
    void TearDown() override { ka_edge_close(edge); }

    ka_verdict_e edge_verdict(const std::string &secret, ka_auth_result_t *out = nullptr) {
        if (!edge) {
            char err[256] = "";
            edge = ka_edge_open(path.c_str(), err, sizeof err);
            EXPECT_NE(edge, nullptr) << err;
            if (!edge) return KA_AUTH_UNAVAILABLE;
        }
        const std::string header = "Bearer " + secret;
        ka_str_t scope{"ip:read", 7};
        ka_auth_result_t r;
        ka_edge_authenticate(edge, header.data(), header.size(), &scope, 1, wall_clock_ms(), &r);
        if (out) *out = r;
        return r.verdict;
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

TEST_F(StoreUpgradeTest, TheFirstWriterUpgradesASchemaOneStoreWithItsHotTable) {
    {
        std::string err;
        auto before = EdgeStore::open(path, err);
        ASSERT_TRUE(before) << err;
        EXPECT_FALSE(before->has_key_slots());  // read through keys_by_hash
    }
    {
        Store store(path);  // opening is the upgrade
        store.create_key(account, "new", {"ip:read"}, 60);
    }
    MDB_env *env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, KA_DB_COUNT);
    ASSERT_EQ(mdb_env_open(env, path.c_str(), MDB_RDONLY, 0), 0);
    MDB_txn *txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
    MDB_dbi meta, by_hash, slots;
    ASSERT_EQ(mdb_dbi_open(txn, KA_DB_META, 0, &meta), 0);
    ASSERT_EQ(mdb_dbi_open(txn, KA_DB_KEYS_BY_HASH, 0, &by_hash), 0);
    ASSERT_EQ(mdb_dbi_open(txn, KA_DB_KEY_SLOTS, 0, &slots), 0);
    MDB_val k{sizeof(KA_META_SCHEMA_VERSION) - 1, const_cast<char *>(KA_META_SCHEMA_VERSION)}, v;
    ASSERT_EQ(mdb_get(txn, meta, &k, &v), 0);
    EXPECT_EQ(std::string(static_cast<char *>(v.mv_data), v.mv_size), std::string("\x02\0\0\0", 4));
    EXPECT_EQ(check_key_slots(txn, by_hash, slots), std::vector<std::string>{});
    mdb_txn_abort(txn);
    mdb_env_close(env);

    std::string err;
    auto after = EdgeStore::open(path, err);
    ASSERT_TRUE(after) << err;
    EXPECT_TRUE(after->has_key_slots());
    after.reset();
    EXPECT_EQ(edge_verdict(fixture["activeKey"]["secret"]), KA_AUTH_OK);
    EXPECT_EQ(edge_verdict(fixture["revokedKey"]["secret"]), KA_AUTH_KEY_INVALID);
}
