#include "store.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "key_format.h"
#include "keyauth_schema.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

class StoreTest : public ::testing::Test {
protected:
    TempDir dir;
    Store store{dir.sub("db")};
    int64_t now = 1'760'000'000'000;

    void SetUp() override {
        store.set_clock([this] { return now++; });
    }

    Id account(uint32_t entitlement = 600, uint32_t max_keys = 100000) {
        AccountChanges controls;
        controls.max_keys = max_keys;
        return store.create_account("acme", entitlement, controls).account.id;
    }

    size_t key_count(const Id &acc) { return store.list_keys(acc, 1000, std::nullopt).keys.size(); }

    void expect_invalid(const std::function<void()> &fn, const std::string &field) {
        try {
            fn();
            ADD_FAILURE() << "no error for field " << field;
        } catch (const StoreError &e) {
            EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid);
            EXPECT_EQ(e.field(), field) << e.what();
            EXPECT_NE(std::string(e.what()).size(), 0u);
        }
    }
};

}  // namespace

TEST_F(StoreTest, AccountGetsAOneTimeConsoleToken) {
    auto made = store.create_account("Acme Ltd", 1200);
    EXPECT_TRUE(secret_format_ok(made.console_token, kConsoleTokenPrefix));
    auto found = store.account_for_console_token(made.console_token);
    ASSERT_TRUE(found);
    EXPECT_EQ(*found, made.account.id);
    EXPECT_FALSE(store.account_for_console_token(generate_secret(kConsoleTokenPrefix)));
    EXPECT_FALSE(store.account_for_console_token("kac_garbage"));
    auto acc = store.find_account(made.account.id);
    ASSERT_TRUE(acc);
    EXPECT_EQ(acc->record.name, "Acme Ltd");
    EXPECT_EQ(acc->record.entitlement_rpm, 1200u);
}

TEST_F(StoreTest, CreateKeyStoresMetadataAndReturnsTheSecretOnce) {
    Id acc = account();
    auto made = store.create_key(acc, "prod", {"ip:read"}, 100);
    EXPECT_TRUE(secret_format_ok(made.secret, kKeyPrefix));
    EXPECT_EQ(made.key.prefix, made.secret.substr(0, 12));
    auto found = store.find_key(made.key.key_id);
    ASSERT_TRUE(found);
    EXPECT_EQ(found->name, "prod");
    EXPECT_EQ(found->scopes, std::vector<std::string>{"ip:read"});
    EXPECT_EQ(found->requested_rpm, 100u);
    EXPECT_EQ(found->account_id, acc);
    EXPECT_EQ(found->status, KA_KEY_ACTIVE);
}

TEST_F(StoreTest, ListShowsOnlyTheCallersKeysInCreationOrder) {
    Id a = account(), b = account();
    std::vector<Id> mine;
    for (int i = 0; i < 5; i++) {
        mine.push_back(store.create_key(a, "a" + std::to_string(i), {"ip:read"}, 10).key.key_id);
        store.create_key(b, "b" + std::to_string(i), {"ip:read"}, 10);
    }
    auto page = store.list_keys(a, 100, std::nullopt);
    ASSERT_EQ(page.keys.size(), 5u);
    for (size_t i = 0; i < 5; i++) {
        EXPECT_EQ(page.keys[i].key_id, mine[i]);
        EXPECT_EQ(page.keys[i].account_id, a);
    }
    EXPECT_FALSE(page.next);
}

TEST_F(StoreTest, CursorPaginationVisitsEveryKeyOnce) {
    Id a = account(), b = account();
    std::vector<Id> all;
    for (int i = 0; i < 23; i++) all.push_back(store.create_key(a, "k", {"ip:read"}, 10).key.key_id);
    store.create_key(b, "other", {"ip:read"}, 10);
    std::vector<Id> seen;
    std::optional<Id> cursor;
    int pages = 0;
    do {
        auto page = store.list_keys(a, 5, cursor);
        for (auto &k : page.keys) seen.push_back(k.key_id);
        cursor = page.next;
        pages++;
    } while (cursor && pages < 100);
    EXPECT_EQ(pages, 5);
    EXPECT_EQ(seen, all);
}

TEST_F(StoreTest, IdsGrowInCreationOrderWithinOneMillisecond) {
    store.set_clock([] { return int64_t{1'760'000'000'000}; });  // time stands still
    Id a = account();
    std::vector<Id> made;
    for (int i = 0; i < 200; i++) made.push_back(store.create_key(a, "k", {"ip:read"}, 10).key.key_id);
    auto bulk = store.create_keys(a, "k", {"ip:read"}, 10, 50);
    for (auto &k : bulk) made.push_back(k.key.key_id);
    for (size_t i = 1; i < made.size(); i++) EXPECT_LT(made[i - 1], made[i]) << i;
    std::vector<Id> listed;
    for (auto &k : store.list_keys(a, 1000, std::nullopt).keys) listed.push_back(k.key_id);
    EXPECT_EQ(listed, made);
}

TEST_F(StoreTest, ListOfAnAccountWithoutKeysIsEmpty) {
    Id a = account();
    account();
    EXPECT_EQ(key_count(a), 0u);
}

TEST_F(StoreTest, RevokeIsIdempotentAndScopedToTheOwner) {
    Id a = account(), b = account();
    auto k = store.create_key(a, "k", {"ip:read"}, 10).key;
    try {
        store.revoke_key(b, k.key_id);
        ADD_FAILURE() << "another account revoked the key";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound);
    }
    EXPECT_EQ(store.find_key(k.key_id)->status, KA_KEY_ACTIVE);
    auto first = store.revoke_key(a, k.key_id);
    EXPECT_EQ(first.status, KA_KEY_REVOKED);
    EXPECT_NE(first.revoked_ms, 0);
    auto second = store.revoke_key(a, k.key_id);
    EXPECT_EQ(second.revoked_ms, first.revoked_ms);
    EXPECT_THROW(store.revoke_key(std::nullopt, generate_id(1)), StoreError);
}

TEST_F(StoreTest, OperatorRevokeNeedsNoOwner) {
    Id a = account();
    auto k = store.create_key(a, "k", {"ip:read"}, 10).key;
    EXPECT_EQ(store.revoke_key(std::nullopt, k.key_id).status, KA_KEY_REVOKED);
}

TEST_F(StoreTest, BadInputIsRefusedByFieldAndNothingIsWritten) {
    Id a = account();
    expect_invalid([&] { store.create_key(a, "", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, std::string(201, 'n'), {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "bad \xff utf8", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "overlong \xc0\xaf", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "surrogate \xed\xa0\x80", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "cut \xe2\x82", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "tab\there", {"ip:read"}, 10); }, "name");
    expect_invalid([&] { store.create_key(a, "k", {}, 10); }, "scopes");
    expect_invalid([&] { store.create_key(a, "k", {"ip"}, 10); }, "scopes");
    expect_invalid([&] { store.create_key(a, "k", {"ip:read", "ip:read"}, 10); }, "scopes");
    expect_invalid([&] { store.create_key(a, "k", std::vector<std::string>(33, "a:b"), 10); }, "scopes");
    expect_invalid([&] { store.create_key(a, "k", {"ip:read"}, 0); }, "rateLimitPerMinute");
    expect_invalid([&] { store.create_key(a, "k", {"ip:read"}, kMaxRatePerMinute + 1); },
                   "rateLimitPerMinute");
    expect_invalid([&] { store.create_account("", 10); }, "name");
    expect_invalid([&] { store.create_account("x", 0); }, "entitlement");
    EXPECT_EQ(key_count(a), 0u);
    EXPECT_EQ(store.list_accounts().size(), 1u);
}

TEST_F(StoreTest, UnicodeNamesAreKept) {
    Id a = account();
    auto k = store.create_key(a, "clé de prod 🔑", {"ip:read"}, 10).key;
    EXPECT_EQ(store.find_key(k.key_id)->name, "clé de prod 🔑");
}

TEST_F(StoreTest, KeyForUnknownAccountIsNotFound) {
    try {
        store.create_key(generate_id(1), "k", {"ip:read"}, 10);
        ADD_FAILURE();
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound);
    }
}

TEST_F(StoreTest, EntitlementChangesAreStored) {
    Id a = account(600);
    EXPECT_EQ(store.set_entitlement(a, 60).record.entitlement_rpm, 60u);
    EXPECT_EQ(store.find_account(a)->record.entitlement_rpm, 60u);
    EXPECT_THROW(store.set_entitlement(generate_id(3), 60), StoreError);
    expect_invalid([&] { store.set_entitlement(a, 0); }, "entitlement");
}

// An empty allowed-scope list is "any scope" (AccountChanges), not a bad
// list: it lifts a limit set before (keyauthctl account update --any-scope).
TEST_F(StoreTest, AnEmptyAllowedScopeListLiftsTheLimit) {
    Id acc = account();
    AccountChanges limit;
    limit.allowed_scopes = std::vector<std::string>{"ip:*"};
    store.update_account(acc, limit);
    EXPECT_THROW(store.create_key(acc, "geo", {"geo:read"}, 5), StoreError);
    AccountChanges any;
    any.allowed_scopes = std::vector<std::string>{};
    EXPECT_TRUE(store.update_account(acc, any).record.allowed_scopes.empty());
    EXPECT_NO_THROW(store.create_key(acc, "geo", {"geo:read"}, 5));
    AccountChanges none;
    none.allowed_scopes = std::vector<std::string>{};
    EXPECT_TRUE(store.create_account("open", 60, none).account.record.allowed_scopes.empty());
    AccountChanges bad;
    bad.allowed_scopes = std::vector<std::string>{"nocolon"};
    expect_invalid([&] { store.update_account(acc, bad); }, "scopes");
}

TEST_F(StoreTest, ReopeningKeepsEverything) {
    Id a = account();
    auto k = store.create_key(a, "k", {"ip:read"}, 10).key;
    Store again(dir.sub("db"));
    EXPECT_TRUE(again.find_key(k.key_id));
    EXPECT_EQ(again.list_accounts().size(), 1u);
}

// Found by the sanitizer end-to-end run: when a commit failed with
// MDB_MAP_FULL, the transaction was aborted twice (a double free). A map
// that may not grow (lmdb_map.h) still fills.
TEST(StoreFull, MapFullIsAnErrorAndTheStoreStaysUsable) {
    TempDir dir;
    auto backend = std::make_unique<LmdbBackend>(dir.sub("db"), size_t{1} << 20);
    backend->map().set_limit(size_t{1} << 20);
    Store store(std::move(backend));
    AccountChanges many;
    many.max_keys = 100000;
    Id acc = store.create_account("a", 10, many).account.id;
    bool full = false;
    size_t made = 0;
    for (int i = 0; i < 100000 && !full; i++) {
        try {
            store.create_key(acc, "k", {"ip:read"}, 10);
            made++;
        } catch (const MapFullError &) {
            full = true;
        }
    }
    EXPECT_TRUE(full);
    EXPECT_GT(made, 100u);
    EXPECT_EQ(store.list_keys(acc, 1000, std::nullopt).keys.size(), std::min<size_t>(made, 1000));
    // Later writes fail the same clean way (or fit in pages the failed one freed).
    try {
        store.create_key(acc, "k", {"ip:read"}, 10);
    } catch (const MapFullError &) {
    }
}

// Found by review: a writer asking for a smaller map than the store was
// written with had its map cut to the data's size, and its next write failed.
TEST(StoreMapSize, TheLargerOfAskedAndRecordedWins) {
    TempDir dir;
    Id acc;
    {
        Store big(dir.sub("db"), size_t{64} << 20);
        AccountChanges many;
        many.max_keys = 100000;
        acc = big.create_account("a", 10, many).account.id;
        big.create_keys(acc, "k", {"ip:read"}, 10, 3000);  // more than 1 MiB
    }
    Store small(dir.sub("db"), size_t{1} << 20);
    EXPECT_NO_THROW(small.create_keys(acc, "more", {"ip:read"}, 10, 3000));
}

// Found by review: keyauthd waited for the writer lock without limit, so a
// create could commit after nginx had answered 504 and the console retried.
TEST(StoreBusy, AWriteThatWaitedTooLongWritesNothing) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Id acc;
    {
        Store setup(path);
        acc = setup.create_account("a", 10).account.id;
    }
    Store store(path);  // opened first: opening writes too
    store.set_write_wait_limit(std::chrono::milliseconds(100));
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    pid_t holder = fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        // another process (its own environment handle, not the parent's)
        // holds the writer lock for half a second
        MDB_env *env = nullptr;
        MDB_txn *txn = nullptr;
        if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, KA_DB_COUNT) != 0 ||
            mdb_env_set_mapsize(env, Store::kDefaultMapSize) != 0 ||
            mdb_env_open(env, path.c_str(), 0, 0660) != 0 ||
            mdb_txn_begin(env, nullptr, 0, &txn) != 0) {
            _exit(1);
        }
        (void)!write(ready[1], "x", 1);
        usleep(500 * 1000);
        mdb_txn_abort(txn);
        mdb_env_close(env);
        _exit(0);
    }
    char byte;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    try {
        store.create_key(acc, "late", {"ip:read"}, 10);
        ADD_FAILURE() << "the write went through after waiting";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kBusy) << e.what();
    }
    int status = 0;
    waitpid(holder, &status, 0);
    EXPECT_EQ(status, 0);
    EXPECT_TRUE(store.list_keys(acc, 10, std::nullopt).keys.empty());
    EXPECT_NO_THROW(store.create_key(acc, "now", {"ip:read"}, 10));  // once the lock is free
}

// The account's live-key count keeps the cap exact without reading every
// key: revocations give places back, a batch over the cap writes nothing.
TEST_F(StoreTest, TheKeyCapCountsLiveKeysAndABatchOverItWritesNothing) {
    Id acc = account(600, 5);
    auto made = store.create_keys(acc, KeySpec{"k", {"ip:read"}, 10, std::nullopt, {}}, 4);
    EXPECT_EQ(store.find_account(acc)->record.live_keys, 4u);
    try {
        store.create_keys(acc, KeySpec{"k", {"ip:read"}, 10, std::nullopt, {}}, 2);
        FAIL() << "over the cap";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kConflict);
        EXPECT_EQ(e.code(), "KEY_LIMIT_REACHED");
    }
    EXPECT_EQ(key_count(acc), 4u) << "nothing of the refused batch was written";
    store.revoke_key(acc, made[0].key.key_id);
    store.revoke_key(acc, made[0].key.key_id);  // again: no second release
    EXPECT_EQ(store.find_account(acc)->record.live_keys, 3u);
    store.create_keys(acc, KeySpec{"k", {"ip:read"}, 10, std::nullopt, {}}, 2);
    EXPECT_EQ(store.find_account(acc)->record.live_keys, 5u);
    // at the cap, a roll with no grace still works: one out, one in
    EXPECT_THROW(store.create_key(acc, KeySpec{"k", {"ip:read"}, 10, std::nullopt, {}}), StoreError);
    store.roll_key(acc, made[1].key.key_id, 0);
    EXPECT_EQ(store.find_account(acc)->record.live_keys, 5u);
}

TEST_F(StoreTest, LifecycleInputsAreValidatedBeforeAnythingIsWritten) {
    Id acc = account();
    CreatedKey k = store.create_key(acc, "k", {"ip:read"}, 10);
    expect_invalid([&] { store.create_key(acc, KeySpec{"k", {"ip:read"}, 10, now - 1, {}}); }, "expiresAt");
    expect_invalid([&] { store.create_key(acc, KeySpec{"k", {"ip:read"}, 10, now + Store::kMaxExpiryAheadMs + 10, {}}); },
                   "expiresAt");
    expect_invalid([&] { store.update_key(acc, k.key.key_id, KeyChanges{}); }, "body");
    expect_invalid([&] { store.roll_key(acc, k.key.key_id, Store::kMaxGraceSeconds + 1); }, "gracePeriodSeconds");
    expect_invalid([&] { store.roll_key(acc, k.key.key_id, -1); }, "gracePeriodSeconds");
    expect_invalid([&] { store.rotate_console_token(acc, -5); }, "graceSeconds");
    AccountChanges zero;
    zero.max_keys = 0;
    expect_invalid([&] { store.update_account(acc, zero); }, "maxKeys");
    AccountChanges bad_scope;
    bad_scope.allowed_scopes = std::vector<std::string>{"nope"};
    expect_invalid([&] { store.update_account(acc, bad_scope); }, "scopes");
    expect_invalid([&] { store.update_account(acc, AccountChanges{}); }, "body");
    EXPECT_EQ(store.list_audit(acc, 100, std::nullopt).events.size(), 2u) << "account.create, key.create only";
    // an update that changes nothing writes nothing, and records nothing
    KeyChanges same;
    same.name = "k";
    store.update_key(acc, k.key.key_id, same);
    store.set_suspended(acc, false);
    EXPECT_EQ(store.list_audit(acc, 100, std::nullopt).events.size(), 2u);
}

TEST_F(StoreTest, TheOperatorsAuditListsEveryAccountNewestFirstAndPages) {
    Id a = account(), b = account();
    store.create_key(a, "k", {"ip:read"}, 10);
    store.create_key(b, "k", {"ip:read"}, 10);
    store.set_exchange_rate(83'000'000, Actor::operator_named("ops"));
    AuditPage all = store.list_audit(std::nullopt, 100, std::nullopt);
    ASSERT_EQ(all.events.size(), 5u);
    EXPECT_EQ(all.events.front().action, "fx.set");
    EXPECT_EQ(all.events.front().changes["exchangeRate"]["to"], "83");
    for (size_t i = 1; i < all.events.size(); i++) EXPECT_GT(all.events[i - 1].id, all.events[i].id);
    AuditPage first = store.list_audit(std::nullopt, 2, std::nullopt);
    ASSERT_TRUE(first.next);
    AuditPage rest = store.list_audit(std::nullopt, 100, first.next);
    EXPECT_EQ(first.events.size() + rest.events.size(), 5u);
    EXPECT_EQ(rest.events.front().id, all.events[2].id);
    EXPECT_FALSE(rest.next);
}
