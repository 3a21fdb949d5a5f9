// A store of schema 2 (tests/fixtures/store-v2: keys_by_hash, keys and a
// key_slots table of layout 1, made by keyauthctl before schema 3) keeps
// working: the edge reads it as it is, the first writer moves its keys to
// key_records in one transaction, and an edge that had it open follows the
// upgrade without a reload.
#include <gtest/gtest.h>

#include <functional>

#include <lmdb.h>

#include "keyauth_schema.h"
#include "lmdb_backend.h"
#include "store_error.h"
#include "store.h"
#include "store_fixture.h"
#include "store_layout.h"

using namespace keyauth;
using keyauth::testing::expect_schema_three;
using keyauth::testing::layout_of;

namespace {

class SchemaTwoStore : public keyauth::testing::StoreFixture {
protected:
    SchemaTwoStore() : StoreFixture("store-v2") {}
    Id account{};

    void SetUp() override {
        StoreFixture::SetUp();
        ASSERT_TRUE(parse_id(kAccountIdPrefix, fixture["account"]["id"].get<std::string>(), account));
    }

    Id key_id(const char *name) {
        Id id{};
        EXPECT_TRUE(parse_id(kKeyIdPrefix, fixture[name]["id"].get<std::string>(), id));
        return id;
    }

    ka_verdict_e verdict(const std::string &secret, const char *scope = "ip:read") {
        ka_auth_result_t r;
        const ka_verdict_e v = edge_verdict(secret, &r, scope);
        if (v == KA_AUTH_UNAVAILABLE) ADD_FAILURE() << "unavailable: " << r.reason;
        return v;
    }
    ka_verdict_e verdict(const char *name) { return verdict(fixture[name]["secret"].get<std::string>()); }

    // What a writer of some future build would commit first: schema 9.
    void commit_schema_nine() {
        keyauth::testing::put_behind_writers(path, KA_DB_META, KA_META_SCHEMA_VERSION, keyauth::testing::kSchemaNine);
    }

    // What every reader must say of the fixture's keys, whatever the schema.
    void expect_the_fixture_keys() {
        EXPECT_EQ(verdict("inlineKey"), KA_AUTH_OK);
        EXPECT_EQ(verdict("inRecordKey"), KA_AUTH_OK);  // two scopes: read from its record
        EXPECT_EQ(verdict(fixture["inRecordKey"]["secret"].get<std::string>(), "dns:write"), KA_AUTH_OK);
        EXPECT_EQ(verdict("quotaKey"), KA_AUTH_OK);
        EXPECT_EQ(verdict("successorKey"), KA_AUTH_OK);
        EXPECT_EQ(verdict("revokedKey"), KA_AUTH_KEY_INVALID);
        EXPECT_EQ(verdict("ka_" + std::string(38, 'A')), KA_AUTH_KEY_INVALID);  // no such key
    }
};

TEST_F(SchemaTwoStore, TheEdgeReadsItAsItIs) {
    EXPECT_EQ(layout_of(path).schema, 2u);
    expect_the_fixture_keys();
}

TEST_F(SchemaTwoStore, TheFirstWriterMovesItsKeysAndAnOpenEdgeFollows) {
    expect_the_fixture_keys();  // the edge opens schema 2
    Id made{};
    std::string made_secret;
    {
        Store store(path);  // opening is the upgrade
        expect_schema_three(path, 6);

        // the same edge, never reopened, reads schema 3 now
        expect_the_fixture_keys();

        // the Store reads every key by id, by account and by hash
        KeyPage page = store.list_keys(account, 10, std::nullopt);
        ASSERT_EQ(page.keys.size(), 6u);
        EXPECT_EQ(page.keys[0].key_id, key_id("inlineKey"));
        EXPECT_EQ(page.keys[1].scopes, (std::vector<std::string>{"ip:read", "dns:write"}));
        ASSERT_TRUE(store.find_key(key_id("successorKey")));
        EXPECT_EQ(store.find_key(key_id("successorKey"))->rolled_from, key_id("rolledKey"));
        EXPECT_EQ(store.account_for_console_token(fixture["account"]["consoleToken"].get<std::string>()), account);

        // writes go on: a new key, a revocation of a key moved
        CreatedKey k = store.create_key(account, "after", {"ip:read"}, 60);
        made = k.key.key_id;
        made_secret = k.secret;
        store.revoke_key(account, key_id("inRecordKey"));
    }
    EXPECT_EQ(verdict(made_secret), KA_AUTH_OK);
    EXPECT_EQ(verdict("inRecordKey"), KA_AUTH_KEY_INVALID);
    EXPECT_EQ(verdict("inlineKey"), KA_AUTH_OK);
    expect_schema_three(path, 7);
}

TEST_F(SchemaTwoStore, AnOpenEdgeRefusesASchemaItDoesNotReadOnceItIsCommitted) {
    expect_the_fixture_keys();
    {
        Store store(path);  // schema 3
    }
    commit_schema_nine();  // under the open edge

    ka_auth_result_t r;
    EXPECT_EQ(edge_verdict(fixture["inlineKey"]["secret"].get<std::string>(), &r), KA_AUTH_UNAVAILABLE);
    EXPECT_NE(std::string(r.reason).find("schema_version"), std::string::npos) << r.reason;
    EXPECT_NE(std::string(r.reason).find("version 9"), std::string::npos) << r.reason;
}

// A writer that opened the store before a newer build moved it on (as this
// build moves 2 to 3 in place) refuses every transaction it begins after, its
// reads too, naming what to do, and writes nothing: it would read keys as
// missing (a revocation answered "no such key", the key left working) and
// write tables the newer schema may no longer read.
TEST_F(SchemaTwoStore, AWriterOpenWhenANewerOneMovesTheStoreOnRefusesItsTransactions) {
    Store store(path);         // keyauthd's and keyauthctl's way in
    LmdbBackend mirror(path);  // keyauth-syncd's
    store.create_key(account, "before", {"ip:read"}, 60);
    ASSERT_TRUE(mirror.write([](MDB_txn *) { return true; }));
    commit_schema_nine();

    const auto refused = [](const char *what, const std::function<void()> &call) {
        try {
            call();
            ADD_FAILURE() << what << " went on at schema 9";
        } catch (const StoreError &e) {
            EXPECT_EQ(e.kind(), StoreError::Kind::kUnavailable) << what;
            const std::string m = e.what();
            EXPECT_NE(m.find("schema 9"), std::string::npos) << m;
            EXPECT_NE(m.find("restart"), std::string::npos) << m;
        }
    };
    refused("a key created", [&] { store.create_key(account, "after", {"ip:read"}, 60); });
    refused("a key revoked", [&] { store.revoke_key(account, key_id("inlineKey")); });
    refused("a key listed", [&] { store.list_keys(account, 10, std::nullopt); });
    refused("syncd's batch", [&] { mirror.write([](MDB_txn *) { return true; }); });

    const auto layout = layout_of(path);
    EXPECT_EQ(layout.schema, 9u);
    EXPECT_EQ(layout.databases.at(KA_DB_KEY_RECORDS), 7u);  // the six moved, and "before"
}

// A key record the upgrade cannot read (a layout from the future, written
// behind the writers' back) stops the move with a clear error, and the store
// stays as it was: schema 2, every table of schema 2 in place.
TEST_F(SchemaTwoStore, AnUnreadableKeyRecordStopsTheUpgradeAndChangesNothing) {
    keyauth::testing::put_behind_writers(path, KA_DB_KEYS_BY_HASH, std::string(KA_HASH_LEN, 'z'),
                                         std::string("\x63\0 layout 99", 12));
    try {
        LmdbBackend store(path);
        ADD_FAILURE() << "the upgrade went on";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt);
        EXPECT_NE(std::string(e.what()).find("does not decode"), std::string::npos) << e.what();
    }
    const auto layout = layout_of(path);
    EXPECT_EQ(layout.schema, 2u);
    EXPECT_EQ(layout.databases.at(KA_DB_KEYS_BY_HASH), 7u);
    EXPECT_EQ(layout.databases.at(KA_DB_KEYS), 6u);
    EXPECT_EQ(layout.databases.count(KA_DB_KEY_RECORDS), 0u);
    EXPECT_EQ(verdict("inlineKey"), KA_AUTH_OK);  // the edge still reads it
}

}  // namespace
