// keyauth-syncd's sync loop against real etcd members on loopback
// (tests/etcd_cluster.h; no mocks): the first rebuild mirrors every record,
// live events follow, compaction and another cluster rebuild, refused
// records hold the edge back visibly. Every wait is on a condition with a
// deadline; the store is read while the loop is stopped (it is the only
// writer, and one process must not open an environment twice while it
// writes), except for a reader snapshot held across a swap on purpose.
#include <gtest/gtest.h>

#include "syncd_loop_fixtures.h"
#include "usage_keyspace.h"

using namespace keyauth;
using namespace keyauth::syncd;
using keyauth::testing::Dump;
using keyauth::testing::EtcdCluster;
using keyauth::testing::TempDir;
namespace kt = keyauth::testing;
using namespace std::chrono_literals;
using namespace keyauth::testing::syncd_loop;

TEST(SyncdLoop, TheFirstRebuildMirrorsEveryRecordThenLiveEventsFollow) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    const int64_t populated = populate(*c, 4, 5);

    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    Metrics metrics;
    EXPECT_EQ(metrics.handle(healthz()).status, 503);
    {
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, populated); }, 30s))
            << "applied " << metrics.applied_revision();
        EXPECT_EQ(metrics.rebuilds(), 1u);
        EXPECT_EQ(metrics.handle(healthz()).status, 200);
        ASSERT_TRUE(kt::wait_until([&] { return metrics.etcd_up(); }, 10s));

        // live: a new key and its account in one txn, a revocation (a put of
        // the changed record), a deletion, a plan change
        int64_t rev = write_txn(*c, {{Table::kAccounts, kt::id_bytes(kt::test_id(9)), kt::account_record("new")},
                                     {Table::kKeysByHash, kt::test_hash(900), kt::key_record(900, 9)}});
        rev = write(*c, Table::kKeysByHash, kt::test_hash(100), kt::key_record(100, 1, /*revoked=*/true));
        rev = write(*c, Table::kKeysByHash, kt::test_hash(101), std::nullopt);
        rev = write(*c, Table::kPlans, "pro", std::nullopt);
        const uint64_t events_before = metrics.events();
        ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= rev; }, 20s))
            << "applied " << metrics.applied_revision() << " of " << rev;
        EXPECT_GE(metrics.events(), 5u);
        (void)events_before;
        EXPECT_EQ(metrics.rebuilds(), 1u) << "events, not a rebuild";
        // a change that names nothing to apply still advances the revision
        int64_t skipped = put_raw(*c, etcd_last_key_record(kPrefix, Table::kAccounts), "last");
        ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= skipped; }, 20s));
        // progress notifications (about every second) keep the lag low
        // while nothing changes
        const auto quiet_since = std::chrono::steady_clock::now();
        ASSERT_TRUE(kt::wait_until(
            [&] {
                return std::chrono::steady_clock::now() - quiet_since > 2500ms && metrics.lag_seconds() < 1.9;
            },
            15s))
            << "lag " << metrics.lag_seconds();
        EXPECT_TRUE(metrics.etcd_up());
    }
    EXPECT_FALSE(metrics.etcd_up());
    expect_mirrors(*c, mirror);
    expect_skipped_records_absent(mirror);
    const Dump d = kt::dump_env(mirror.env());
    EXPECT_EQ(d.at(KA_DB_KEYS).at(kt::id_bytes(kt::test_id(900))), kt::test_hash(900));
    EXPECT_EQ(d.at(KA_DB_KEYS).count(kt::id_bytes(kt::test_id(101))), 0u);
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).at(kt::test_hash(100)), kt::key_record(100, 1, true));
    EXPECT_EQ(d.at(KA_DB_PLANS).count("pro"), 0u);
    EXPECT_EQ(mirror.mark()->revision, metrics.applied_revision());
}

TEST(SyncdLoop, CompactionPastTheAppliedRevisionRebuildsUnderAReader) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    int64_t rev = populate(*c, 2, 3);

    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror mirror(path, 0);
    {
        Metrics metrics;
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
    }
    const int64_t before = mirror.mark()->revision;
    const Dump old_data = kt::dump_env(mirror.env());

    // while syncd is away: writes, then a compaction past its revision
    rev = write(*c, Table::kPlans, "basic", std::nullopt);
    rev = write(*c, Table::kPlans, "enterprise", kt::plan_record("enterprise", 999900));
    rev = write(*c, Table::kKeysByHash, kt::test_hash(100), kt::key_record(100, 1, true));
    etcd::CompactionResponse compacted;
    ASSERT_TRUE(c->compact(rev, true, compacted).ok());

    kt::Reader old_reader(path);  // an nginx worker's snapshot, held across the swap
    ASSERT_TRUE(old_reader.ok());
    old_reader.hold();
    const ino_t data_inode = kt::inode_of(path + "/data.mdb");

    Metrics metrics;
    {
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return metrics.rebuilds() == 1 && applied_at_least(metrics, rev); }, 30s))
            << "rebuilds " << metrics.rebuilds() << ", applied " << metrics.applied_revision();
    }
    EXPECT_GT(mirror.mark()->revision, before);
    EXPECT_EQ(kt::without_mark(old_reader.held()), kt::without_mark(old_data))
        << "the old snapshot still reads the old data";
    EXPECT_NE(kt::inode_of(path + "/data.mdb"), data_inode);
    kt::Reader new_reader(path);
    ASSERT_TRUE(new_reader.ok());
    const Dump fresh = new_reader.now();
    EXPECT_EQ(fresh.at(KA_DB_PLANS).count("enterprise"), 1u);
    EXPECT_EQ(fresh.at(KA_DB_PLANS).count("basic"), 0u);
    expect_mirrors(*c, mirror);
    expect_skipped_records_absent(mirror);
    EXPECT_FALSE(std::filesystem::exists(mirror.rebuild_path()));
}

TEST(SyncdLoop, AnotherClusterIsRebuiltFromNotMixedIn) {
    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    uint64_t first_cluster = 0;
    {
        EtcdCluster a(1);
        ASSERT_TRUE(a.ok()) << a.error();
        auto c = connect(a);
        ASSERT_NE(c, nullptr);
        int64_t rev = populate(*c, 3, 2);
        // history far ahead of the next cluster's, so revisions alone would mislead
        for (int i = 0; i < 30; ++i) rev = write(*c, Table::kPlans, "churn", kt::plan_record("churn", 100 + i));
        Metrics metrics;
        Running run(a, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
        run.stop();
        first_cluster = mirror.mark()->cluster_id;
    }
    EtcdCluster b(1);
    ASSERT_TRUE(b.ok()) << b.error();
    auto c = connect(b);
    ASSERT_NE(c, nullptr);
    int64_t rev = write(*c, Table::kPlans, "only-in-b", kt::plan_record("only-in-b", 1));
    ASSERT_LT(rev, mirror.mark()->revision);
    Metrics metrics;
    {
        Running run(b, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return metrics.rebuilds() == 1; }, 30s));
        int64_t later = write(*c, Table::kAccounts, kt::id_bytes(kt::test_id(5)), kt::account_record("b"));
        ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= later; }, 20s));
    }
    EXPECT_NE(mirror.mark()->cluster_id, first_cluster);
    expect_mirrors(*c, mirror);
    const Dump d = kt::dump_env(mirror.env());
    EXPECT_EQ(d.at(KA_DB_PLANS).count("churn"), 0u);
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).size(), 0u);
}

// Issue 27, item 2: a record the edge cannot apply stops it there, and it
// says so (/healthz 503, a lag that grows, apply_blocked); it serves its
// copy; once the record is gone from etcd it rebuilds and is current again.
TEST(SyncdLoop, ARecordThatCannotBeAppliedStopsTheEdgeVisiblyUntilItIsGone) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    int64_t good = write(*c, Table::kPlans, "basic", kt::plan_record("basic", 49900));

    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    Metrics metrics(2s);
    {
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, good); }, 30s));
        ASSERT_TRUE(kt::wait_until([&] { return metrics.handle(healthz()).status == 200; }, 10s));
        int64_t bad = write(*c, Table::kKeysByHash, kt::test_hash(5), kt::unknown_layout_key_record());
        ASSERT_TRUE(kt::wait_until([&] { return metrics.blocked(); }, 20s));
        HttpResponse h = metrics.handle(healthz());
        EXPECT_EQ(h.status, 503) << "cannot apply: not healthy";
        EXPECT_NE(h.body.find("CANNOT_APPLY"), std::string::npos) << h.body;
        EXPECT_NE(h.body.find(etcd_record_key(kPrefix, Table::kKeysByHash, kt::test_hash(5))), std::string::npos)
            << "names the record: " << h.body;
        EXPECT_NE(metrics.text().find("keyauth_syncd_apply_blocked 1"), std::string::npos);
        // the lag grows past the threshold: it means "since last known current"
        ASSERT_TRUE(kt::wait_until([&] { return metrics.lag_seconds() > 2.0; }, 20s));
        const int64_t later = write(*c, Table::kPlans, "pro", kt::plan_record("pro", 99900));
        EXPECT_GE(metrics.apply_errors(), 1u);
        EXPECT_LT(metrics.applied_revision(), bad) << "never skipped";
        EXPECT_LT(metrics.applied_revision(), later);

        // the operator deletes the record: the edge is current again, the
        // changes after it applied (a watch would replay the put: a rebuild)
        write(*c, Table::kKeysByHash, kt::test_hash(5), std::nullopt);
        ASSERT_TRUE(kt::wait_until([&] { return !metrics.blocked() && metrics.applied_revision() >= later; }, 30s));
        ASSERT_TRUE(kt::wait_until([&] { return metrics.handle(healthz()).status == 200; }, 10s));
        EXPECT_EQ(metrics.rebuilds(), 2u);
        const int64_t after = write(*c, Table::kPlans, "after", kt::plan_record("after", 1));
        ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= after; }, 30s));
    }
    expect_mirrors(*c, mirror);
    EXPECT_EQ(kt::dump_env(mirror.env()).at(KA_DB_KEYS_BY_HASH).count(kt::test_hash(5)), 0u);
}

// A store opened from disk is not known to be current until etcd says so.
TEST(SyncdLoop, AStoreOpenedFromDiskStartsBehindUntilEtcdSaysItIsCurrent) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    int64_t rev = write(*c, Table::kPlans, "basic", kt::plan_record("basic", 49900));
    TempDir dir;
    {
        Mirror mirror(dir.sub("db"), 0);
        Metrics metrics;
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
    }
    Mirror reopened(dir.sub("db"), 0);
    Metrics metrics(1s);
    ASSERT_TRUE(kt::wait_until([&] { return metrics.lag_seconds() > 1.0; }, 10s));
    EXPECT_EQ(metrics.handle(healthz()).status, 503) << "nothing said it is current";
    Running run(etcd, reopened, metrics);
    ASSERT_TRUE(kt::wait_until([&] { return metrics.handle(healthz()).status == 200; }, 20s))
        << "a progress notification of the synced watch: current";
    EXPECT_EQ(metrics.rebuilds(), 0u);
}

// Issue 27, item 1: a cluster restored from a snapshot goes back in
// revisions; writes after the restore reuse revisions the store already
// holds. The edge notices and rebuilds: a key revoked after the restore is
// revoked at the edge.
TEST(SyncdLoop, AClusterRestoredFromASnapshotIsRebuiltFrom) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    write(*c, Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acct"));
    write(*c, Table::kKeysByHash, kt::test_hash(101), kt::key_record(101, 1));
    TempDir dir;
    const std::string snap = dir.sub("snap.db");
    ASSERT_TRUE(etcd.save_snapshot(snap)) << etcd.error();
    // after the snapshot: more writes, which the restore will undo
    int64_t rev = 0;
    for (int i = 0; i < 20; i++) rev = write(*c, Table::kPlans, "p" + std::to_string(i), kt::plan_record("p", 100));

    Mirror mirror(dir.sub("db"), 0);
    Metrics metrics;
    {
        Running run(etcd, mirror, metrics);
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
        ASSERT_TRUE(etcd.restore_snapshot(snap)) << etcd.error();
        c = connect(etcd);
        ASSERT_NE(c, nullptr);
        // the key is revoked after the restore, at a revision the store has seen
        int64_t revoke = write(*c, Table::kKeysByHash, kt::test_hash(101), kt::key_record(101, 1, true));
        ASSERT_LT(revoke, rev) << "the restore took the revision back";
        ASSERT_TRUE(kt::wait_until([&] { return metrics.rebuilds() >= 2; }, 30s)) << "rebuilt after the restore";
        ASSERT_TRUE(kt::wait_until([&] { return metrics.handle(healthz()).status == 200; }, 30s));
        // the rebuild may have read the cluster before the revocation was
        // written (it then comes through the watch): wait for its revision
        ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, revoke); }, 30s))
            << "applied " << metrics.applied_revision() << ", the revocation is " << revoke;
    }
    const Dump d = kt::dump_env(mirror.env());
    EXPECT_EQ(key_status(d, 101), KA_KEY_REVOKED) << "the revocation made after the restore reached the edge";
    EXPECT_EQ(d.at(KA_DB_PLANS).count("p3"), 0u) << "what the restore undid is gone from the edge too";
    expect_mirrors(*c, mirror);
}

// Issue 27, item 4: progress notifications advance the stored revision, so
// an edge of a quiet prefix (while usage keeps etcd's revision climbing)
// survives a compaction and a lost watch without a rebuild.
TEST(SyncdLoop, AQuietEdgeStaysCurrentAcrossACompaction) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    int64_t rev = write(*c, Table::kPlans, "basic", kt::plan_record("basic", 49900));
    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    Metrics metrics;
    Running run(etcd, mirror, metrics, [](SyncOptions &o) { o.mark_interval = 0ms; });
    ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev); }, 30s));
    // usage traffic: outside the watched range, the revision climbs
    int64_t usage = 0;
    for (int i = 0; i < 30; i++) usage = put_raw(*c, etcd_usage_prefix(kPrefix) + "edge/" + std::to_string(i), "x");
    ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= usage; }, 20s))
        << "a progress notification advanced the revision";
    ASSERT_TRUE(kt::wait_until([&] { return mirror.mark() && mirror.mark()->revision >= usage; }, 20s))
        << "and it is stored";
    etcd::CompactionResponse compacted;
    ASSERT_TRUE(c->compact(usage, true, compacted).ok());
    // the member syncd watches goes and comes back: the new watch starts
    // after the stored mark, which the compaction has not passed
    ASSERT_TRUE(etcd.restart(0)) << etcd.error();
    int64_t revoke = 0;
    ASSERT_TRUE(kt::wait_until(
        [&] {
            etcd::PutResponse out;
            if (!c->put({etcd_record_key(kPrefix, Table::kPlans, "after"), kt::plan_record("after", 1)}, out).ok())
                return false;
            revoke = out.header.revision;
            return true;
        },
        30s));
    ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= revoke; }, 30s));
    EXPECT_EQ(metrics.rebuilds(), 1u) << "no rebuild: the watch resumed after the stored mark";
}

TEST(SyncdLoop, FailsOverToAnotherMemberAndWaitsOutAnOutage) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd);
    ASSERT_NE(c, nullptr);
    int64_t rev = write(*c, Table::kPlans, "basic", kt::plan_record("basic", 49900));

    TempDir dir;
    Mirror mirror(dir.sub("db"), 0);
    Metrics metrics;
    Running run(etcd, mirror, metrics);
    ASSERT_TRUE(kt::wait_until([&] { return applied_at_least(metrics, rev) && metrics.etcd_up(); }, 30s));

    // the member syncd started on goes: the watch moves to another one
    etcd.kill(0);
    auto write_until_ok = [&](const std::string &plan) {
        int64_t r = 0;
        kt::wait_until(
            [&] {
                etcd::PutResponse out;
                etcd::Status s = c->put({etcd_record_key(kPrefix, Table::kPlans, plan), kt::plan_record(plan, 1)}, out);
                r = out.header.revision;
                return s.ok();
            },
            30s);
        return r;
    };
    rev = write_until_ok("after-kill");
    ASSERT_GT(rev, 0);
    ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= rev; }, 30s));
    EXPECT_EQ(metrics.rebuilds(), 1u) << "a new watch from the next revision, no rebuild";

    // every member left silent: the edge keeps its copy, and says it is stale
    etcd.stop(1);
    etcd.stop(2);
    ASSERT_TRUE(kt::wait_until([&] { return !metrics.etcd_up(); }, 20s));
    ASSERT_TRUE(kt::wait_until([&] { return metrics.lag_seconds() > 2.0; }, 20s));
    EXPECT_EQ(metrics.handle(healthz()).status, 200);
    etcd.resume(1);
    etcd.resume(2);
    rev = write_until_ok("after-outage");
    ASSERT_GT(rev, 0);
    ASSERT_TRUE(kt::wait_until([&] { return metrics.applied_revision() >= rev && metrics.etcd_up(); }, 30s));
    run.stop();
    EXPECT_EQ(metrics.rebuilds(), 1u);
    expect_mirrors(*c, mirror);
}
