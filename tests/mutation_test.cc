// The one write path: mutations applied by the LMDB backend, the function
// that applies records (and keeps the derived tables), and the Store's
// retries when a guard fails.
#include "mutation.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "keyauth_schema.h"
#include "lmdb_apply.h"
#include "lmdb_backend.h"
#include "records.h"
#include "sha256.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

template <size_t N>
std::string str(const std::array<unsigned char, N> &a) {
    return std::string(reinterpret_cast<const char *>(a.data()), N);
}

KeyRecord key_of(const Id &account, int64_t now) {
    KeyRecord r;
    r.key_id = generate_id(now);
    r.account_id = account;
    r.created_ms = now;
    r.requested_rpm = 60;
    r.scopes = {"ip:read"};
    r.prefix = "ka_0123456789";
    r.name = "k";
    return r;
}

std::string hash_of(const std::string &secret) { return str(sha256(secret)); }

// Every record of every table, to compare whole stores.
using Dump = std::map<std::string, std::map<std::string, std::string>>;

Dump dump(StoreBackend &b) {
    Dump out;
    auto r = b.read();
    for (size_t i = 0; i < kTableCount; i++) {
        Table t = static_cast<Table>(i);
        auto &rows = out[table_name(t)];
        r->scan(t, "", "", [&](std::string_view k, std::string_view v) {
            rows.emplace(k, v);
            return true;
        });
    }
    return out;
}

std::optional<std::string> get(StoreBackend &b, Table t, const std::string &key) {
    auto v = b.read()->get(t, key);
    if (!v) return std::nullopt;
    return std::string(*v);
}

bool apply(StoreBackend &b, const Mutation &m) { return b.begin_write()->apply(m); }

class MutationTest : public ::testing::Test {
protected:
    TempDir dir;
    LmdbBackend backend{dir.sub("db")};
    Id account = generate_id(1'760'000'000'000);
    KeyRecord key = key_of(account, 1'760'000'000'001);
    std::string hash = hash_of("secret one");

    Mutation put_key(const KeyRecord &rec) {
        Mutation m;
        m.put(Table::kKeysByHash, hash, encode_key_record(rec));
        return m;
    }
};

}  // namespace

TEST_F(MutationTest, AppliesPrimaryRecordsAndTheirDerivedTables) {
    Mutation m = put_key(key);
    m.put(Table::kAccounts, str(account),
          encode_account_record(AccountRecord{KA_ACCOUNT_ACTIVE, 600, 1, "acme", KA_DEFAULT_MAX_KEYS, 0, {}, "", KA_OVERRIDE_RATE, {}}));
    m.expect(Table::kKeysByHash, hash, std::nullopt);
    ASSERT_TRUE(apply(backend, m));
    EXPECT_EQ(get(backend, Table::kKeysByHash, hash), encode_key_record(key));
    EXPECT_EQ(get(backend, Table::kKeys, str(key.key_id)), hash);
    EXPECT_EQ(get(backend, Table::kAccountKeys, str(account) + str(key.key_id)), hash);
    EXPECT_TRUE(get(backend, Table::kAccounts, str(account)));
}

TEST_F(MutationTest, AFailedGuardWritesNothing) {
    ASSERT_TRUE(apply(backend, put_key(key)));
    const Dump before = dump(backend);
    KeyRecord other = key_of(account, 1'760'000'000'002);
    std::string other_hash = hash_of("secret two");
    auto attempt = [&](auto add_guard) {
        Mutation m;
        m.put(Table::kKeysByHash, other_hash, encode_key_record(other));
        m.put(Table::kPlans, "basic", "x");
        add_guard(m);
        return apply(backend, m);
    };
    EXPECT_FALSE(attempt([&](Mutation &m) { m.expect(Table::kKeysByHash, hash, std::nullopt); }));
    EXPECT_FALSE(attempt([&](Mutation &m) { m.expect(Table::kKeysByHash, hash, "stale bytes"); }));
    EXPECT_FALSE(attempt([&](Mutation &m) { m.expect(Table::kPlans, "basic", "x"); }));  // absent
    EXPECT_FALSE(attempt([&](Mutation &m) { m.expect_none_after(Table::kKeys, ""); }));
    EXPECT_EQ(dump(backend), before);
    // the same guards hold when they describe the store as it is
    EXPECT_TRUE(attempt([&](Mutation &m) {
        m.expect(Table::kKeysByHash, hash, encode_key_record(key));
        m.expect_none_after(Table::kKeys, str(key.key_id));
    }));
}

// What keyauth-syncd relies on: a batch seen twice (a restart between the
// LMDB commit and the watch's next event) leaves the store as once did.
TEST_F(MutationTest, TheSameRecordsAppliedTwiceGiveTheSameStore) {
    Mutation m = put_key(key);
    KeyRecord revoked = key;
    revoked.status = KA_KEY_REVOKED;
    revoked.revoked_ms = 5;
    m.put(Table::kKeysByHash, hash, encode_key_record(revoked));
    m.put(Table::kConsoleTokens, hash_of("token"), encode_token_record(TokenRecord{account, 0}));
    m.put(Table::kMeta, KA_META_FX_USD_INR, encode_fx_record(FxRecord{83'000'000, 7}));
    m.put(Table::kPlans, "gone", "x");
    m.erase(Table::kPlans, "gone");
    ASSERT_TRUE(apply(backend, m));
    const Dump once = dump(backend);
    ASSERT_TRUE(apply(backend, m));
    EXPECT_EQ(dump(backend), once);

    TempDir other;  // and records applied one by one in another store agree
    LmdbBackend again(other.sub("db"));
    for (const RecordChange &c : m.changes) {
        Mutation one;
        one.changes.push_back(c);
        ASSERT_TRUE(apply(again, one));
    }
    EXPECT_EQ(dump(again), once);
}

TEST_F(MutationTest, RevokingAndDeletingKeepTheDerivedTablesInStep) {
    ASSERT_TRUE(apply(backend, put_key(key)));
    KeyRecord revoked = key;
    revoked.status = KA_KEY_REVOKED;
    revoked.revoked_ms = 9;
    ASSERT_TRUE(apply(backend, put_key(revoked)));
    EXPECT_EQ(get(backend, Table::kKeys, str(key.key_id)), hash);
    EXPECT_EQ(get(backend, Table::kAccountKeys, str(account) + str(key.key_id)), hash);

    // a record that moved to another account leaves no entry behind
    KeyRecord moved = key;
    moved.account_id = generate_id(1'760'000'000'100);
    ASSERT_TRUE(apply(backend, put_key(moved)));
    EXPECT_FALSE(get(backend, Table::kAccountKeys, str(account) + str(key.key_id)));
    EXPECT_EQ(get(backend, Table::kAccountKeys, str(moved.account_id) + str(key.key_id)), hash);

    Mutation del;
    del.erase(Table::kKeysByHash, hash);
    ASSERT_TRUE(apply(backend, del));
    const Dump after = dump(backend);
    EXPECT_TRUE(after.at(KA_DB_KEYS_BY_HASH).empty());
    EXPECT_TRUE(after.at(KA_DB_KEYS).empty());
    EXPECT_TRUE(after.at(KA_DB_ACCOUNT_KEYS).empty());
    ASSERT_TRUE(apply(backend, del));  // deleting what is gone is no error
}

TEST_F(MutationTest, RecordsThatAreNotPrimaryAreRefusedWithNothingWritten) {
    const Dump before = dump(backend);
    auto refused = [&](Table t, const std::string &k, const std::string &v) {
        Mutation m;
        m.put(Table::kPlans, "first", "x");  // applied before the bad one, then rolled back
        m.put(t, k, v);
        EXPECT_THROW(apply(backend, m), StoreError) << table_name(t) << " " << k;
    };
    refused(Table::kKeys, str(key.key_id), hash);
    refused(Table::kAccountKeys, str(account) + str(key.key_id), hash);
    refused(Table::kMeta, KA_META_SCHEMA_VERSION, std::string(4, '\x02'));
    std::string future = encode_key_record(key);
    future[0] = '\x09';  // a layout version this build does not know
    refused(Table::kKeysByHash, hash, future);
    refused(Table::kKeysByHash, "short", encode_key_record(key));
    EXPECT_EQ(dump(backend), before);
}

TEST(MutationMapFull, AMutationLargerThanTheMapFailsWithNothingWritten) {
    TempDir dir;
    LmdbBackend backend(dir.sub("db"), size_t{1} << 20);
    backend.map().set_limit(size_t{1} << 20);  // a map that may not grow
    Mutation small;
    small.put(Table::kPlans, "basic", "x");
    ASSERT_TRUE(apply(backend, small));
    const Dump before = dump(backend);
    Mutation big;
    for (int i = 0; i < 4000; i++) big.put(Table::kPlans, "p" + std::to_string(i), std::string(600, 'v'));
    EXPECT_THROW(apply(backend, big), MapFullError);
    EXPECT_EQ(dump(backend), before);
    Mutation later;
    later.put(Table::kPlans, "pro", "y");
    EXPECT_TRUE(apply(backend, later));  // the store is still usable
}

// The same mutation where the map may grow: applied whole, guards and all,
// in a map grown to hold it.
TEST(MutationMapFull, AMutationLargerThanTheMapGrowsItAndIsApplied) {
    TempDir dir;
    LmdbBackend backend(dir.sub("db"), size_t{1} << 20);
    Mutation small;
    small.put(Table::kPlans, "basic", "x");
    ASSERT_TRUE(apply(backend, small));
    Mutation big;
    big.expect(Table::kPlans, "basic", std::string_view("x"));
    for (int i = 0; i < 4000; i++) big.put(Table::kPlans, "p" + std::to_string(i), std::string(600, 'v'));
    EXPECT_TRUE(apply(backend, big));
    EXPECT_EQ(dump(backend).at(table_name(Table::kPlans)).size(), 4001u);
    EXPECT_GT(*backend.gauges().map_bytes, size_t{2} << 20);
}

namespace {

// Loses the first `losses` applies, as if another writer had changed what
// the write was computed from.
class LosingBackend final : public StoreBackend {
public:
    LosingBackend(const std::string &path, int losses) : inner_(path), losses_(losses) {}

    std::unique_ptr<RecordReader> read() override { return inner_.read(); }
    std::unique_ptr<WriteAttempt> begin_write() override {
        return std::make_unique<Attempt>(inner_.begin_write(), losses_, attempts_);
    }
    void set_write_wait_limit(std::chrono::milliseconds limit) override {
        inner_.set_write_wait_limit(limit);
    }
    size_t max_keys_per_write() const override { return inner_.max_keys_per_write(); }
    int attempts() const { return attempts_; }

private:
    class Attempt final : public WriteAttempt {
    public:
        Attempt(std::unique_ptr<WriteAttempt> inner, int &losses, int &attempts)
            : inner_(std::move(inner)), losses_(losses) {
            attempts++;
        }
        std::optional<std::string_view> get(Table t, std::string_view k) override { return inner_->get(t, k); }
        void scan(Table t, std::string_view within, std::string_view from, const Visit &visit) override {
            inner_->scan(t, within, from, visit);
        }
        std::optional<std::string> last_key(Table t) override { return inner_->last_key(t); }
        bool apply(const Mutation &m) override {
            if (losses_ > 0) {
                losses_--;
                return false;
            }
            return inner_->apply(m);
        }

    private:
        std::unique_ptr<WriteAttempt> inner_;
        int &losses_;
    };

    LmdbBackend inner_;
    int losses_;
    int attempts_ = 0;
};

}  // namespace

TEST(StoreRetries, AWriteWhoseGuardFailedIsComputedAgain) {
    TempDir dir;
    auto owned = std::make_unique<LosingBackend>(dir.sub("db"), 2);
    LosingBackend &backend = *owned;
    Store store(std::move(owned));
    Id acc = store.create_account("a", 10).account.id;  // lost twice, then applied
    EXPECT_EQ(backend.attempts(), 3);
    EXPECT_EQ(store.list_accounts().size(), 1u);
    auto made = store.create_key(acc, "k", {"ip:read"}, 10);
    EXPECT_EQ(store.find_key(made.key.key_id)->name, "k");
}

TEST(StoreRetries, AWriteThatKeepsLosingIsBusyAndWritesNothing) {
    TempDir dir;
    auto owned = std::make_unique<LosingBackend>(dir.sub("db"), Store::kWriteAttempts);
    LosingBackend &backend = *owned;
    Store store(std::move(owned));
    try {
        store.create_account("a", 10);
        ADD_FAILURE() << "a write that never applied was acknowledged";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kBusy) << e.what();
    }
    EXPECT_EQ(backend.attempts(), Store::kWriteAttempts);
    EXPECT_TRUE(store.list_accounts().empty());
}

// A mutation computed in one attempt and applied after another write changed
// what it read: its guard fails and the newer write stands.
TEST(StoreRetries, AStaleMutationDoesNotApply) {
    TempDir dir;
    auto owned = std::make_unique<LmdbBackend>(dir.sub("db"));
    LmdbBackend &backend = *owned;
    Store store(std::move(owned));
    Id acc = store.create_account("a", 600).account.id;
    Mutation stale;
    {
        auto w = backend.begin_write();
        auto was = w->get(Table::kAccounts, str(acc));
        ASSERT_TRUE(was);
        stale.expect(Table::kAccounts, str(acc), was);
        stale.put(Table::kAccounts, str(acc),
                  encode_account_record(AccountRecord{KA_ACCOUNT_ACTIVE, 1, 1, "stale", KA_DEFAULT_MAX_KEYS, 0, {}, "", KA_OVERRIDE_RATE, {}}));
    }  // not applied: the attempt ends and the writer lock is free
    store.set_entitlement(acc, 60);
    EXPECT_FALSE(apply(backend, stale));
    EXPECT_EQ(store.find_account(acc)->record.entitlement_rpm, 60u);
    EXPECT_EQ(store.find_account(acc)->record.name, "a");
}
