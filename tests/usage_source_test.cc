// Where keyauthd reads usage: the edge's usage env on one host, and on many
// edges the sum of what every edge's keyauth-syncd published to etcd (real
// members on loopback, tests/etcd_cluster.h). The publisher is tested here
// too, as the writer of what the etcd source reads.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <lmdb.h>

#include <atomic>
#include <cstring>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "etcd_cluster.h"
#include "etcd_keyspace.h"
#include "mutation.h"
#include "record_changes.h"
#include "store_error.h"
#include "syncd_metrics.h"
#include "temp_dir.h"
#include "usage_env.h"
#include "usage_keyspace.h"
#include "usage_publisher.h"
#include "usage_record.h"
#include "usage_source.h"

using namespace keyauth;
using keyauth::testing::EtcdCluster;
using keyauth::testing::TempDir;

namespace {

const std::string kPrefix = "/keyauth/1";

Id id_of(unsigned char c) {
    Id id;
    id.fill(c);
    return id;
}

// Adds to a key's totals in a usage env, as the collecting worker does.
void count(const std::string &path, const Id &account, const Id &key, uint64_t allowed,
           uint64_t limited, int64_t last) {
    std::string err;
    auto env = UsageEnv::open(path, err);
    ASSERT_TRUE(env) << err;
    UsageDelta d{};
    std::memcpy(d.account_id, account.data(), KA_ID_LEN);
    std::memcpy(d.key_id, key.data(), KA_ID_LEN);
    d.allowed = allowed;
    d.rate_limited = limited;
    d.last_used_ms = last;
    ASSERT_TRUE(env->add(&d, 1, last, err)) << err;
}

syncd::UsagePublisherOptions publisher_options(const EtcdCluster &etcd, const std::string &usage_db) {
    syncd::UsagePublisherOptions o;
    o.etcd.endpoints = etcd.endpoint_list();
    o.etcd.request_timeout = std::chrono::milliseconds(2000);
    o.prefix = kPrefix;
    o.usage_db = usage_db;
    return o;
}

}  // namespace

TEST(UsageKeyspace, KeysRoundTripAndStrangersAreRefused) {
    const unsigned char edge[KA_USAGE_EDGE_ID_LEN] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff};
    const std::string within = etcd_usage_account_prefix(kPrefix, id_of(1));
    const std::string k = etcd_usage_key(kPrefix, id_of(1), id_of(0xc3), edge);
    EXPECT_EQ(k, "/keyauth/1/usage/010101010101010101010101c3c3c3c3c3c3c3c3c3c3c3c3/ab0102030405060708090aff");
    Id key;
    ASSERT_TRUE(parse_etcd_usage_key(within, k, key));
    EXPECT_EQ(key, id_of(0xc3));
    EXPECT_FALSE(parse_etcd_usage_key(within, k + "0", key));
    EXPECT_FALSE(parse_etcd_usage_key(within, k.substr(0, k.size() - 1) + "G", key));
    EXPECT_FALSE(parse_etcd_usage_key(etcd_usage_account_prefix(kPrefix, id_of(2)), k, key));
    std::string bent = k;
    bent[within.size() + 24] = '_';
    EXPECT_FALSE(parse_etcd_usage_key(within, bent, key));
}

// syncd's watch ends before usage and after every mirrored table.
TEST(UsageKeyspace, SyncdsWatchEndsBeforeUsageAndAfterEveryTable) {
    const std::string end = syncd::watched_end(kPrefix);
    EXPECT_LE(end, etcd_usage_prefix(kPrefix)) << "usage is never watched";
    for (size_t i = 0; i < kTableCount; i++) {
        if (!is_mirrored(static_cast<Table>(i))) continue;
        EXPECT_LT(etcd_table_prefix(kPrefix, static_cast<Table>(i)), end) << table_name(static_cast<Table>(i));
    }
}

TEST(LmdbUsageSource, NoEnvMeansUnusedKeys) {
    TempDir dir;
    auto src = make_usage_source(default_usage_dir(dir.sub("db")), etcd::ClientOptions{}, kPrefix);
    auto u = src->usage_of(id_of(1), {id_of(2), id_of(3)});
    ASSERT_EQ(u.size(), 2u);
    EXPECT_EQ(u[id_of(2)], KeyUsage{});
}

TEST(LmdbUsageSource, ReadsTheTotalsOfTheAccountsKeys) {
    TempDir dir;
    auto src = make_usage_source(default_usage_dir(dir.sub("db")), etcd::ClientOptions{}, kPrefix);
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)], KeyUsage{}) << "before the env exists";
    const std::string path = dir.sub("db") + KA_USAGE_DIR_SUFFIX;
    count(path, id_of(1), id_of(2), 5, 1, 1000);
    count(path, id_of(1), id_of(2), 2, 0, 2000);
    count(path, id_of(9), id_of(3), 7, 7, 3000);  // another account's key
    auto u = src->usage_of(id_of(1), {id_of(2), id_of(3)});
    EXPECT_EQ(u[id_of(2)], (KeyUsage{7, 1, 2000}));
    EXPECT_EQ(u[id_of(3)], KeyUsage{}) << "only the account's own keys";
}

// An env written by an edge older than the hour and day buckets holds only
// the totals table: they are read (not zeros), there are no buckets, and
// once an edge of this build writes the env (making the bucket tables) its
// buckets are read too, by the same source.
TEST(LmdbUsageSource, AnEnvWithoutBucketTablesStillGivesItsTotals) {
    TempDir dir;
    auto src = make_usage_source(default_usage_dir(dir.sub("db")), etcd::ClientOptions{}, kPrefix);
    const std::string path = dir.sub("db") + KA_USAGE_DIR_SUFFIX;
    {  // the older edge's env, by plain LMDB: the usage table only
        ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
        MDB_env *env = nullptr;
        ASSERT_EQ(mdb_env_create(&env), 0);
        mdb_env_set_maxdbs(env, KA_USAGE_DB_COUNT);
        ASSERT_EQ(mdb_env_open(env, path.c_str(), 0, 0600), 0);
        MDB_txn *txn = nullptr;
        MDB_dbi dbi;
        ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
        ASSERT_EQ(mdb_dbi_open(txn, KA_USAGE_DB_USAGE, MDB_CREATE, &dbi), 0);
        unsigned char k[KA_USAGE_KEY_LEN], v[KA_USAGE_RECORD_SIZE];
        std::memcpy(k, id_of(1).data(), KA_ID_LEN);
        std::memcpy(k + KA_ID_LEN, id_of(2).data(), KA_ID_LEN);
        encode_usage_record(UsageTotals{4, 2, 1500}, v);
        MDB_val kv{sizeof(k), k}, vv{sizeof(v), v};
        ASSERT_EQ(mdb_put(txn, dbi, &kv, &vv, 0), 0);
        ASSERT_EQ(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }
    auto hours = [&] {
        int rows = 0;
        src->buckets(Granularity::kHour, 0, 1000000, nullptr, nullptr,
                     [&](const BucketRow &) { rows++; });
        return rows;
    };
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)], (KeyUsage{4, 2, 1500}));
    EXPECT_EQ(hours(), 0);
    count(path, id_of(1), id_of(2), 1, 0, 3600000);  // an edge of this build
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)], (KeyUsage{5, 2, 3600000}));
    EXPECT_EQ(hours(), 1) << "the bucket tables, made later, are found";
}

// A usage store removed (the recovery of a corrupt one) or replaced while
// keyauthd runs: the next read notices that the files at the path are not
// the ones it has open and reads the path's (none: unused; a new store: its
// counts), never the deleted files until a restart (#44 item 11).
TEST(LmdbUsageSource, FollowsAStoreRemovedOrReplacedAtItsPath) {
    TempDir dir;
    const std::string path = dir.sub("db") + KA_USAGE_DIR_SUFFIX;
    auto src = make_usage_source(path, etcd::ClientOptions{}, kPrefix);
    count(path, id_of(1), id_of(2), 5, 0, 1000);
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)].allowed, 5u);
    ASSERT_EQ(std::system(("rm -rf '" + path + "'").c_str()), 0);
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)], KeyUsage{}) << "removed: nothing used";
    count(path, id_of(1), id_of(2), 2, 0, 2000);  // the worker's new store
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)].allowed, 2u) << "the new store at the path";
    // another store put in its place (moved aside, another put back)
    const std::string other = dir.sub("other.usage");
    count(other, id_of(1), id_of(2), 9, 0, 3000);
    ASSERT_EQ(std::rename(path.c_str(), dir.sub("aside.usage").c_str()), 0);
    ASSERT_EQ(std::rename(other.c_str(), path.c_str()), 0);
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)].allowed, 9u) << "the store now at the path";
}

// keyauthd reads usage from its pool threads at once while the edge's worker
// writes. The usage table's handle is opened once (LMDB forbids opening
// handles in concurrent transactions, and an aborted one closed the handle
// under the other readers: a use after free that ASan reports here).
TEST(LmdbUsageSource, ConcurrentReadersWhileTheWorkerWrites) {
    TempDir dir;
    auto src = make_usage_source(default_usage_dir(dir.sub("db")), etcd::ClientOptions{}, kPrefix);
    const std::string path = dir.sub("db") + KA_USAGE_DIR_SUFFIX;
    count(path, id_of(1), id_of(2), 1, 0, 1000);
    std::atomic<int> wrong{0};
    // the writer is another process, as the nginx worker is (LMDB allows
    // one open of an environment per process)
    const pid_t writer = fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        for (int i = 0; i < 200; i++) count(path, id_of(1), id_of(2), 1, 0, 1000 + i);
        _exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; t++) {
        readers.emplace_back([&] {
            uint64_t seen = 0;
            for (int i = 0; i < 10000; i++) {
                const uint64_t now = src->usage_of(id_of(1), {id_of(2)})[id_of(2)].allowed;
                if (now < seen || now == 0) wrong++;  // totals only grow
                seen = now;
            }
        });
    }
    for (auto &r : readers) r.join();
    int status = 0;
    ASSERT_EQ(waitpid(writer, &status, 0), writer);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the writer failed";
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_GE(src->usage_of(id_of(1), {id_of(2)})[id_of(2)].allowed, 2u);
}

TEST(EtcdUsageSource, SumsEveryEdgesPublishedTotals) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge-a.usage"), b = dir.sub("edge-b.usage");
    syncd::Metrics ma, mb;
    std::string error;
    auto pa = syncd::UsagePublisher::make(publisher_options(etcd, a), ma, error);
    auto pb = syncd::UsagePublisher::make(publisher_options(etcd, b), mb, error);
    ASSERT_TRUE(pa && pb) << error;
    EXPECT_TRUE(pa->publish_once()) << "no usage env yet: nothing to do";

    count(a, id_of(1), id_of(2), 10, 2, 5000);
    count(a, id_of(1), id_of(3), 1, 0, 4000);
    count(b, id_of(1), id_of(2), 5, 1, 6000);
    count(b, id_of(8), id_of(9), 100, 0, 7000);  // another account
    ASSERT_TRUE(pa->publish_once());
    ASSERT_TRUE(pb->publish_once());
    EXPECT_EQ(ma.usage_published(), 2u);
    EXPECT_EQ(mb.usage_published(), 2u);

    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto src = make_usage_source(dir.sub("unused"), co, kPrefix);
    auto u = src->usage_of(id_of(1), {id_of(2), id_of(3), id_of(4)});
    EXPECT_EQ(u[id_of(2)], (KeyUsage{15, 3, 6000}));
    EXPECT_EQ(u[id_of(3)], (KeyUsage{1, 0, 4000}));
    EXPECT_EQ(u[id_of(4)], KeyUsage{});

    // only what changed is put again, and totals replace totals
    ASSERT_TRUE(pa->publish_once());
    EXPECT_EQ(ma.usage_published(), 2u);
    count(a, id_of(1), id_of(2), 1, 0, 8000);
    ASSERT_TRUE(pa->publish_once());
    EXPECT_EQ(ma.usage_published(), 3u);
    EXPECT_EQ(src->usage_of(id_of(1), {id_of(2)})[id_of(2)], (KeyUsage{16, 3, 8000}));
}

TEST(EtcdUsageSource, AFailedPublicationIsCountedAndMadeGoodLater) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge.usage");
    // more keys than one txn takes
    for (int i = 0; i < 300; i++) {
        Id k = id_of(2);
        k[10] = static_cast<unsigned char>(i);
        k[11] = static_cast<unsigned char>(i >> 8);
        count(a, id_of(1), k, 1, 0, 1000 + i);
    }
    syncd::Metrics m;
    std::string error;
    auto p = syncd::UsagePublisher::make(publisher_options(etcd, a), m, error);
    ASSERT_TRUE(p) << error;
    etcd.stop(0);
    EXPECT_FALSE(p->publish_once());
    EXPECT_EQ(m.usage_publish_errors(), 1u);
    EXPECT_EQ(m.usage_published(), 0u);
    etcd.resume(0);
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(m.usage_published(), 300u) << "in three transactions";

    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto src = make_etcd_usage_source(co, kPrefix);
    Id k = id_of(2);
    k[10] = 7;
    k[11] = 0;
    EXPECT_EQ(src->usage_of(id_of(1), {k})[k], (KeyUsage{1, 0, 1007}));
    etcd.kill(0);
    EXPECT_THROW(src->usage_of(id_of(1), {k}), StoreError);
}
