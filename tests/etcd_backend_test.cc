// The Store over the etcd backend, against a real etcd member on loopback
// (tests/etcd_cluster.h; no mocks): the same business rules as on LMDB, the
// records laid out as the keyspace says, guards that refuse a stale write,
// ordered ids across concurrent writers, etcd's transaction limits, and a
// clear "unavailable" when the cluster is gone.
#include "etcd_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "etcd_cluster.h"
#include "key_index.h"
#include "records.h"
#include "store.h"

using namespace keyauth;
using keyauth::testing::EtcdCluster;
using namespace std::chrono_literals;

namespace {

template <size_t N>
std::string str(const std::array<unsigned char, N> &a) {
    return std::string(reinterpret_cast<const char *>(a.data()), N);
}

class EtcdBackendTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { cluster_ = new EtcdCluster(1); }
    static void TearDownTestSuite() {
        delete cluster_;
        cluster_ = nullptr;
    }
    void SetUp() override {
        ASSERT_TRUE(cluster_->ok()) << cluster_->error();
        // a prefix of its own per test: tests never see each other's records
        prefix_ = "/test/" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name());
    }

    std::unique_ptr<EtcdBackend> backend(std::chrono::milliseconds timeout = 5000ms) {
        EtcdBackendOptions o;
        o.endpoints = cluster_->endpoints();
        o.prefix = prefix_;
        o.request_timeout = timeout;
        std::string error;
        auto b = EtcdBackend::make(o, error);
        EXPECT_NE(b, nullptr) << error;
        return b;
    }
    std::unique_ptr<Store> store() { return std::make_unique<Store>(backend()); }

    // Every record under the prefix, by etcd key.
    std::map<std::string, std::string> etcd_records() {
        std::string error;
        etcd::ClientOptions o;
        o.endpoints = cluster_->endpoint_list();
        auto c = etcd::Client::make(o, error);
        std::map<std::string, std::string> all;
        etcd::RangeRequest r;
        r.key = prefix_ + "/";
        r.range_end = etcd::prefix_range_end(r.key);
        etcd::Status st = c->range_all(r, 500, [&](const etcd::RangeResponse &page) {
            for (const auto &kv : page.kvs) all[kv.key] = kv.value;
            return true;
        });
        EXPECT_TRUE(st.ok()) << st.message;
        return all;
    }

    static EtcdCluster *cluster_;
    std::string prefix_;
};

EtcdCluster *EtcdBackendTest::cluster_ = nullptr;

TEST_F(EtcdBackendTest, TheStoresRulesHoldOnEtcd) {
    auto s = store();
    CreatedAccount acc = s->create_account("acme", 600);
    EXPECT_EQ(s->account_for_console_token(acc.console_token), acc.account.id);
    EXPECT_EQ(s->account_for_console_token("kc_" + std::string(40, 'a')), std::nullopt);

    std::vector<Id> ids;
    for (int i = 0; i < 5; i++) ids.push_back(s->create_key(acc.account.id, "k" + std::to_string(i), {"ip:read"}, 60).key.key_id);
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));

    KeyPage first = s->list_keys(acc.account.id, 2, std::nullopt);
    ASSERT_EQ(first.keys.size(), 2u);
    ASSERT_TRUE(first.next);
    KeyPage rest = s->list_keys(acc.account.id, 10, first.next);
    ASSERT_EQ(rest.keys.size(), 3u);
    EXPECT_FALSE(rest.next);
    EXPECT_EQ(rest.keys.back().key_id, ids.back());

    CreatedAccount other = s->create_account("other", 60);
    EXPECT_THROW(s->revoke_key(other.account.id, ids[0]), StoreError) << "another account's key is not found";
    KeyRecord revoked = s->revoke_key(acc.account.id, ids[0]);
    EXPECT_EQ(revoked.status, KA_KEY_REVOKED);
    EXPECT_EQ(s->revoke_key(acc.account.id, ids[0]).revoked_ms, revoked.revoked_ms) << "revoking twice changes nothing";
    EXPECT_EQ(s->find_key(ids[0])->status, KA_KEY_REVOKED);
    EXPECT_TRUE(s->list_keys(other.account.id, 10, std::nullopt).keys.empty());

    EXPECT_EQ(s->set_entitlement(acc.account.id, 1200).record.entitlement_rpm, 1200u);
    EXPECT_EQ(s->find_account(acc.account.id)->record.entitlement_rpm, 1200u);

    auto plan = [](const char *id, const char *name, uint64_t paise, const char *feature,
                   bool popular, int32_t order) {
        PlanRecord p;
        p.id = id;
        p.name = name;
        p.price_paise = paise;
        p.features = {feature};
        p.popular = popular;
        p.sort_order = order;
        return p;
    };
    PlanRecord a = plan("alpha", "Alpha", 1000, "x", false, 1);
    PlanRecord b = plan("beta", "Beta", 2000, "y", true, 2);
    s->import_plans({a, b});
    s->import_plans({b});
    auto plans = s->list_plans();
    ASSERT_EQ(plans.size(), 1u);
    EXPECT_EQ(plans[0].id, "beta");
    EXPECT_FALSE(s->find_plan("alpha"));

    s->set_exchange_rate(83'250000);
    EXPECT_EQ(s->exchange_rate()->inr_per_usd_micro, 83'250000u);
}

// The keyspace: primary records as LMDB holds them, the index records the
// backend keeps for itself, and the last-key record of keys.
TEST_F(EtcdBackendTest, RecordsAreLaidOutAsTheKeyspaceSays) {
    auto s = store();
    CreatedAccount acc = s->create_account("acme", 600);
    CreatedKey k = s->create_key(acc.account.id, "k", {"ip:read"}, 60);
    auto all = etcd_records();
    std::string hash;
    for (const auto &[key, value] : all) {
        auto name = parse_etcd_record_key(prefix_, key);
        if (name && name->table == Table::kKeysByHash) {
            hash = name->key;
            KeyRecordView v;
            ASSERT_EQ(decode_key_record(value.data(), value.size(), v), DecodeStatus::kOk);
            EXPECT_EQ(v.to_owned().key_id, k.key.key_id);
        }
    }
    ASSERT_EQ(hash.size(), 32u);
    KeyIndex ix = key_index_of(all.at(etcd_record_key(prefix_, Table::kKeysByHash, hash)));
    EXPECT_EQ(all.at(etcd_record_key(prefix_, Table::kKeys, ix.by_id)), hash);
    EXPECT_EQ(all.at(etcd_record_key(prefix_, Table::kAccountKeys, ix.by_account)), hash);
    EXPECT_EQ(all.at(etcd_last_key_record(prefix_, Table::kKeys)), str(k.key.key_id));
    EXPECT_TRUE(all.count(etcd_record_key(prefix_, Table::kAccounts, str(acc.account.id))));
    // 1 account, 1 token, 1 key + 2 index records, the last-key record, the
    // two audit events (account.create, key.create) and their webhook events
    EXPECT_EQ(all.size(), 10u);
    size_t audit = 0, outbox = 0;
    for (const auto &[key, value] : all) {
        auto name = parse_etcd_record_key(prefix_, key);
        if (name && name->table == Table::kAudit) audit++;
        if (name && name->table == Table::kWebhookOutbox) outbox++;
    }
    EXPECT_EQ(audit, 2u);
    EXPECT_EQ(outbox, 2u);
}

TEST_F(EtcdBackendTest, AStaleWriteIsRefusedAndTheStoreRetriesIt) {
    auto b = backend();
    auto s = std::make_unique<Store>(backend());
    CreatedAccount acc = s->create_account("acme", 600);
    // an attempt reads the account, another writer changes it, the attempt applies
    auto attempt = b->begin_write();
    auto read = attempt->get(Table::kAccounts, str(acc.account.id));
    ASSERT_TRUE(read);
    s->set_entitlement(acc.account.id, 900);
    Mutation m;
    m.expect(Table::kAccounts, str(acc.account.id), *read);
    m.put(Table::kAccounts, str(acc.account.id), std::string(*read));
    EXPECT_FALSE(attempt->apply(m)) << "the guard fails: nothing is written";
    EXPECT_EQ(s->find_account(acc.account.id)->record.entitlement_rpm, 900u);

    // a new record whose key appeared meanwhile
    auto second = b->begin_write();
    Mutation add;
    add.expect(Table::kAccounts, str(acc.account.id), std::nullopt);
    add.put(Table::kAccounts, str(acc.account.id), std::string(*read));
    EXPECT_FALSE(second->apply(add));
}

// Ids grow in creation order across writers: many threads, each with its
// own Store over its own backend, as many keyauthd instances would be.
TEST_F(EtcdBackendTest, ConcurrentWritersKeepKeyIdsInCreationOrder) {
    CreatedAccount acc = store()->create_account("acme", 600);
    constexpr int kThreads = 4, kEach = 8;
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    std::vector<std::vector<Id>> made(kThreads);
    for (int t = 0; t < kThreads; t++) {
        threads.emplace_back([&, t] {
            try {
                auto s = store();
                // Four writers on one account contend on purpose: a write that
                // lost 8 times answers busy with nothing written, and is sent
                // again, as keyauthd's client would on a 503 (a loaded machine
                // makes that likelier, never wrong). Anything else fails.
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
                for (int i = 0; i < kEach; i++) {
                    for (;;) {
                        try {
                            made[t].push_back(s->create_key(acc.account.id, "k", {"ip:read"}, 60).key.key_id);
                            break;
                        } catch (const StoreError &e) {
                            if (e.kind() != StoreError::Kind::kBusy || std::chrono::steady_clock::now() > deadline) throw;
                        }
                    }
                }
            } catch (const std::exception &e) {
                ADD_FAILURE() << e.what();
                failures++;
            }
        });
    }
    for (auto &t : threads) t.join();
    ASSERT_EQ(failures, 0);
    std::set<Id> all;
    for (const auto &v : made) {
        EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "one writer's keys in its order";
        all.insert(v.begin(), v.end());
    }
    EXPECT_EQ(all.size(), size_t{kThreads * kEach});
    KeyPage page = store()->list_keys(acc.account.id, 1000, std::nullopt);
    ASSERT_EQ(page.keys.size(), all.size());
    std::vector<Id> listed;
    for (const auto &k : page.keys) listed.push_back(k.key_id);
    EXPECT_EQ(listed, std::vector<Id>(all.begin(), all.end())) << "listed in id order, none lost";
}

TEST_F(EtcdBackendTest, EtcdsTransactionLimitsAreClearErrors) {
    auto s = store();
    CreatedAccount acc = s->create_account("acme", 600);
    EXPECT_EQ(s->max_keys_per_write(), EtcdBackend::kMaxKeysPerWrite);
    EXPECT_EQ(s->create_keys(acc.account.id, "bulk", {"ip:read"}, 60, EtcdBackend::kMaxKeysPerWrite).size(),
              EtcdBackend::kMaxKeysPerWrite)
        << "a full batch fits one etcd txn";
    try {
        s->create_keys(acc.account.id, "bulk", {"ip:read"}, 60, EtcdBackend::kMaxKeysPerWrite + 1);
        FAIL() << "over the batch size";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid);
        EXPECT_EQ(e.field(), "count");
    }
    // a catalog of 200 plans is more than one etcd txn holds: refused, and
    // the catalog stays as it was
    std::vector<PlanRecord> plans;
    for (int i = 0; i < 200; i++) {
        PlanRecord p;
        p.id = "p" + std::to_string(i);
        p.name = "P";
        p.price_paise = 100u + i;
        p.features = {"f"};
        p.popular = i == 0;
        p.sort_order = i;
        plans.push_back(p);
    }
    s->import_plans({plans[0]});
    try {
        s->import_plans(plans);
        FAIL() << "over 128 operations";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid);
        EXPECT_NE(std::string(e.what()).find("128"), std::string::npos) << e.what();
    }
    EXPECT_EQ(s->list_plans().size(), 1u);
}

TEST_F(EtcdBackendTest, AClusterThatIsGoneIsUnavailableWithinTheDeadline) {
    EtcdCluster lone(1);
    ASSERT_TRUE(lone.ok()) << lone.error();
    EtcdBackendOptions o;
    o.endpoints = lone.endpoints();
    o.prefix = prefix_;
    o.request_timeout = 1000ms;
    std::string error;
    auto s = std::make_unique<Store>(EtcdBackend::make(o, error));
    CreatedAccount acc = s->create_account("acme", 600);
    lone.kill(0);
    auto t0 = std::chrono::steady_clock::now();
    try {
        s->create_key(acc.account.id, "k", {"ip:read"}, 60);
        FAIL() << "no cluster";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kUnavailable);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "one call's deadline, not a hang";
}

TEST_F(EtcdBackendTest, UnusableOptionsAreRefused) {
    std::string error;
    EtcdBackendOptions o;
    o.endpoints = "ftp://x";
    EXPECT_EQ(EtcdBackend::make(o, error), nullptr);
    EXPECT_FALSE(error.empty());
    o.endpoints = cluster_->endpoints();
    o.prefix = "no-slash";
    EXPECT_EQ(EtcdBackend::make(o, error), nullptr);
    EXPECT_NE(error.find("prefix"), std::string::npos);
}

}  // namespace
