// keyauth-syncd's watch path when an edge fell behind, against a real etcd
// member (tests/etcd_cluster.h): answers that piled up are applied together
// and in order, a record among them that cannot be applied lets the ones
// before it land, and an answer too large to read turns into a rebuild
// rather than a stall.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <memory>

#include "syncd_loop_fixtures.h"

using namespace keyauth;
using namespace keyauth::syncd;
using namespace keyauth::testing::syncd_loop;
using keyauth::testing::Dump;
using keyauth::testing::EtcdCluster;
using keyauth::testing::TempDir;
namespace kt = keyauth::testing;
using namespace std::chrono_literals;

namespace {

// An edge mirroring a small prefix and watching it, with a way to hold its
// next write back (the store's writer lock, taken as a long apply would
// hold it) while etcd's answers pile up on the connection.
class SyncdFallenBehind : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(etcd.ok()) << etcd.error();
        c = connect(etcd);
        ASSERT_NE(c, nullptr);
        const int64_t populated = populate(*c, 1, 2);
        run = std::make_unique<Running>(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, populated); }, 30s));
        ASSERT_TRUE(kt::wait_until([&] { return metrics.etcd_up(); }, 10s));
    }
    void hold_writes() { ASSERT_EQ(mdb_txn_begin(mirror.env(), nullptr, 0, &held), 0); }
    void let_go() { mdb_txn_abort(held); }

    EtcdCluster etcd{1};
    std::unique_ptr<etcd::Client> c;
    TempDir dir;
    Mirror mirror{dir.sub("db"), 0};
    Metrics metrics;
    std::unique_ptr<Running> run;
    MDB_txn *held = nullptr;
};

}  // namespace

// An edge that fell behind (here: its store's writer lock held, as a long
// apply would) applies the answers that piled up together, in a few LMDB
// writes rather than one each; and nothing is lost or reordered: a key put,
// revoked and deleted across the piled answers ends as etcd has it.
TEST_F(SyncdFallenBehind, AnswersThatPiledUpAreAppliedTogetherInOrder) {
    auto last_txn = [&] {
        MDB_envinfo info;
        EXPECT_EQ(mdb_env_info(mirror.env(), &info), 0);
        return info.me_last_txnid;
    };
    const size_t txns_before = last_txn();
    hold_writes();
    constexpr unsigned kAnswers = 60;
    int64_t rev = 0;
    for (unsigned i = 0; i < kAnswers; ++i) {
        const unsigned key = 1000 + i / 3;
        switch (i % 3) {
        case 0: rev = write(*c, Table::kKeysByHash, kt::test_hash(key), kt::key_record(key, 1)); break;
        case 1: rev = write(*c, Table::kKeysByHash, kt::test_hash(key), kt::key_record(key, 1, true)); break;
        default:
            rev = write(*c, Table::kKeysByHash, kt::test_hash(key),
                        key % 2 ? std::nullopt : std::optional<std::string>(kt::key_record(key, 1, true, "again")));
        }
    }
    let_go();
    ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= rev; }, 20s))
        << "applied " << metrics.applied_revision() << " of " << rev;
    const size_t txns = last_txn() - txns_before;
    EXPECT_LT(txns, kAnswers / 3) << kAnswers << " answers in " << txns << " LMDB writes";
    run->stop();
    expect_mirrors(*c, mirror);
    const Dump d = kt::dump_env(mirror.env());
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).count(kt::test_hash(1001)), 0u) << "put, revoked, deleted";
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).at(kt::test_hash(1000)), kt::key_record(1000, 1, true, "again"));
}

// Among answers that piled up, one holding a record this build cannot read:
// the answers before it land (a revocation among them), as they would have
// one by one, and the edge blocks, visibly, on the one that holds it.
TEST_F(SyncdFallenBehind, ARefusedRecordAmongPiledUpAnswersLetsTheOnesBeforeItLand) {
    hold_writes();
    write(*c, Table::kKeysByHash, kt::test_hash(1000), kt::key_record(1000, 1));
    const int64_t revoked = write(*c, Table::kKeysByHash, kt::test_hash(100), kt::key_record(100, 1, true));
    const int64_t bad = write(*c, Table::kKeysByHash, kt::test_hash(999), kt::unknown_layout_key_record());
    write(*c, Table::kKeysByHash, kt::test_hash(101), kt::key_record(101, 1, true));
    let_go();
    ASSERT_TRUE(kt::wait_until([&] { return metrics.blocked(); }, 20s));
    EXPECT_EQ(metrics.applied_revision(), revoked);
    run->stop();
    const Dump d = kt::dump_env(mirror.env());
    EXPECT_EQ(key_status(d, 100), KA_KEY_REVOKED) << "the revocation before the refused record is in force";
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).count(kt::test_hash(1000)), 1u);
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).count(kt::test_hash(999)), 0u);
    EXPECT_EQ(key_status(d, 101), KA_KEY_ACTIVE) << "nothing after it";
    EXPECT_LT(mirror.mark()->revision, bad);
}

// Issue 27, item 3: a catch-up answer over the client's size bound (here
// 1 MiB; 64 MiB in production) would be asked for again and again; the edge
// rebuilds from a snapshot instead, which reads only mirrored tables.
TEST(SyncdLoop, AnOversizedCatchUpAnswerNeverStallsTheEdge) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    write(*c, Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acct"));
    int64_t rev = write(*c, Table::kKeysByHash, kt::test_hash(101), kt::key_record(101, 1));
    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    auto small = [](SyncOptions &o) { o.etcd.max_answer_bytes = 1u << 20; };
    {
        Metrics metrics;
        Running run(etcd, mirror, metrics, small);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
    }
    // while syncd is away: 3 MB of audit-sized records in one stretch of
    // revisions (never mirrored, but inside the watched range), then a revocation
    const std::string blob(15000, 'a');
    for (int i = 0; i < 200; i++) {
        std::vector<RecordChange> audit;
        audit.push_back({Table::kAudit, "evt" + std::to_string(i), blob});
        write_txn(*c, audit);
    }
    int64_t revoke = write(*c, Table::kKeysByHash, kt::test_hash(101), kt::key_record(101, 1, true));
    Metrics metrics;
    {
        Running run(etcd, mirror, metrics, small);
        ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= revoke; }, 30s))
            << "the revocation reached the edge";
        EXPECT_GE(metrics.rebuilds(), 1u) << "through a rebuild";
    }
    EXPECT_EQ(key_status(kt::dump_env(mirror.env()), 101), KA_KEY_REVOKED);
}
