// keyauth-syncd without etcd: which etcd keys become LMDB changes, the
// metrics and /healthz, and the Mirror (marked batches, rebuild and swap).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "edge_store.h"
#include "etcd_keyspace.h"
#include "mirror.h"
#include "record_changes.h"
#include "store_error.h"
#include "store_layout.h"
#include "syncd_fixtures.h"
#include "syncd_metrics.h"
#include "temp_dir.h"

using namespace keyauth;
using namespace keyauth::syncd;
using keyauth::testing::Dump;
using keyauth::testing::TempDir;
namespace kt = keyauth::testing;

namespace {

const std::string kPrefix = "/keyauth/1";

etcd::Event put_event(const std::string &key, const std::string &value, int64_t revision) {
    etcd::Event e;
    e.type = etcd::EventType::kPut;
    e.kv.key = key;
    e.kv.value = value;
    e.kv.mod_revision = revision;
    return e;
}

etcd::Event delete_event(const std::string &key, int64_t revision) {
    etcd::Event e;
    e.type = etcd::EventType::kDelete;
    e.kv.key = key;
    e.kv.mod_revision = revision;
    return e;
}

// A mirror holding `changes` as a complete snapshot at `revision`.
void rebuild_with(Mirror &m, const std::vector<RecordChange> &changes, int64_t revision,
                  uint64_t cluster = 7) {
    auto rb = m.begin_rebuild();
    rb->add(changes);
    m.finish_rebuild(std::move(rb), MirrorMark{revision, cluster});
}

std::vector<RecordChange> some_records() {
    return {
        {Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acme")},
        {Table::kKeysByHash, kt::test_hash(1), kt::key_record(10, 1)},
        {Table::kKeysByHash, kt::test_hash(2), kt::key_record(11, 1)},
        {Table::kPlans, "basic", kt::plan_record("basic", 49900)},
        {Table::kMeta, KA_META_CATALOG_VERSION, kt::u64_le(1)},
    };
}

}  // namespace

// ---- etcd keys → changes ------------------------------------------------

TEST(SyncdRecordChanges, SkipsWhatIsNotAMirroredRecord) {
    const std::string hash = kt::test_hash(1);
    auto change = record_change(kPrefix, etcd_record_key(kPrefix, Table::kKeysByHash, hash), std::string("v"));
    ASSERT_TRUE(change);
    EXPECT_EQ(change->table, Table::kKeysByHash);
    EXPECT_EQ(change->key, hash);
    EXPECT_EQ(change->value, std::optional<std::string>("v"));
    auto gone = record_change(kPrefix, etcd_record_key(kPrefix, Table::kPlans, "basic"), std::nullopt);
    ASSERT_TRUE(gone);
    EXPECT_FALSE(gone->value);
    EXPECT_TRUE(record_change(kPrefix, etcd_record_key(kPrefix, Table::kMeta, KA_META_FX_USD_INR), std::string("x")));

    for (const std::string &skipped : {
             etcd_last_key_record(kPrefix, Table::kKeys),
             etcd_record_key(kPrefix, Table::kKeys, kt::id_bytes(kt::test_id(1))),
             etcd_record_key(kPrefix, Table::kAccountKeys, kt::id_bytes(kt::test_id(1)) + kt::id_bytes(kt::test_id(2))),
             etcd_record_key(kPrefix, Table::kMeta, KA_META_SCHEMA_VERSION),
             etcd_record_key(kPrefix, Table::kMeta, KA_META_SYNCD_REVISION),
             etcd_record_key(kPrefix, Table::kMeta, KA_META_CLUSTER_ID),
             kPrefix + "/no_such_table/00",
             kPrefix + "/plans/ZZ",
             kPrefix + "/plans/",
             std::string("/keyauth/10/plans/00"),
         }) {
        EXPECT_FALSE(record_change(kPrefix, skipped, std::string("v"))) << skipped;
    }
}

TEST(SyncdRecordChanges, ABatchAdvancesToItsHighestRevisionSkippedEventsIncluded) {
    Batch b = batch_of_events(kPrefix, {
                                           put_event(etcd_record_key(kPrefix, Table::kPlans, "a"), "1", 5),
                                           delete_event(etcd_record_key(kPrefix, Table::kPlans, "b"), 6),
                                           put_event(etcd_last_key_record(kPrefix, Table::kKeys), "x", 7),
                                       });
    EXPECT_EQ(b.revision, 7);
    EXPECT_EQ(b.read, 3u);
    EXPECT_EQ(b.skipped, 1u);
    ASSERT_EQ(b.changes.size(), 2u);
    EXPECT_TRUE(b.changes[0].value);
    EXPECT_FALSE(b.changes[1].value);

    Batch only_skipped = batch_of_events(kPrefix, {put_event(kPrefix + "/last/plans", "x", 9)});
    EXPECT_TRUE(only_skipped.changes.empty());
    EXPECT_EQ(only_skipped.revision, 9);
    // the watch covers the mirrored tables and what sorts between them only
    EXPECT_EQ(watched_prefix(kPrefix), "/keyauth/1/accounts/");
    EXPECT_EQ(watched_end(kPrefix), "/keyauth/1/plans0");
    for (size_t i = 0; i < kTableCount; i++) {
        const Table t = static_cast<Table>(i);
        const std::string p = etcd_table_prefix(kPrefix, t);
        if (is_mirrored(t)) {
            EXPECT_TRUE(p >= watched_prefix(kPrefix) && p < watched_end(kPrefix)) << table_name(t);
        }
    }
    EXPECT_LT(etcd_table_prefix(kPrefix, Table::kAccountKeys), watched_prefix(kPrefix))
        << "written with every key, never mirrored: outside the watch";
}

// ---- metrics and healthz ------------------------------------------------

// Every key a rebuild must apply falls in exactly one snapshot range, and no
// key it would skip (index records, last/) is read at all.
TEST(SyncdRecordChanges, SnapshotRangesCoverEveryMirroredRecordOnce) {
    const std::string prefix = "/keyauth/1";
    auto ranges = snapshot_ranges(prefix);
    EXPECT_EQ(ranges.size(), 256u + 4u) << "keys_by_hash in 256, four small tables whole";
    auto hits = [&](const std::string &key) {
        int n = 0;
        for (const auto &r : ranges) n += key >= r.key && key < r.range_end;
        return n;
    };
    for (int b : {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff}) {
        std::string hash(32, static_cast<char>(b));
        EXPECT_EQ(hits(etcd_record_key(prefix, Table::kKeysByHash, hash)), 1) << b;
    }
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kAccounts, std::string(12, 'a'))), 1);
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kConsoleTokens, std::string(32, 'b'))), 1);
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kPlans, "plus-5k")), 1);
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kMeta, "fx_usd_inr")), 1);
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kKeys, std::string(12, 'c'))), 0);
    EXPECT_EQ(hits(etcd_record_key(prefix, Table::kAccountKeys, std::string(24, 'd'))), 0);
    EXPECT_EQ(hits(etcd_last_key_record(prefix, Table::kKeys)), 0);
    EXPECT_EQ(hits("/keyauth/10/accounts/61"), 0) << "a sibling prefix";
}

// Lag is the time since the edge last knew it was current; past max_lag
// /healthz answers 503 BEHIND, with the figures.
TEST(SyncdMetrics, HealthzIs503PastTheLagThreshold) {
    Metrics m(std::chrono::milliseconds(50));
    m.set_applied(7);
    m.current();
    HttpRequest get;
    get.method = "GET";
    get.path = "/healthz";
    EXPECT_EQ(m.handle(get).status, 200);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (m.lag_seconds() <= 0.06 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    HttpResponse r = m.handle(get);
    EXPECT_EQ(r.status, 503);
    auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["error"]["code"], "BEHIND");
    EXPECT_EQ(body["revision"], 7);
    m.current();
    EXPECT_EQ(m.handle(get).status, 200);
}

TEST(SyncdMetrics, HealthzWaitsForASnapshotAndMetricsNameEverything) {
    Metrics m;
    HttpRequest get;
    get.method = "GET";
    get.path = "/healthz";
    HttpResponse r = m.handle(get);
    EXPECT_EQ(r.status, 503);
    EXPECT_NE(r.body.find("\"error\""), std::string::npos);

    m.set_applied(42);
    m.current();
    r = m.handle(get);
    EXPECT_EQ(r.status, 200);
    auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["revision"], 42);
    EXPECT_LT(body["lagSeconds"].get<double>(), 60.0);

    // a record that cannot be applied: 503 naming it, until it can be
    m.set_blocked(true, "cannot apply /keyauth/1/keys_by_hash/00: layout 99");
    r = m.handle(get);
    EXPECT_EQ(r.status, 503);
    EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["code"], "CANNOT_APPLY");
    EXPECT_NE(r.body.find("layout 99"), std::string::npos);
    m.set_blocked(false);
    EXPECT_EQ(m.handle(get).status, 200);

    m.add_events(3);
    m.add_rebuild();
    m.add_apply_error();
    m.set_etcd_up(true);
    get.path = "/metrics";
    r = m.handle(get);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type.rfind("text/plain", 0), 0u);
    for (const char *line : {"keyauth_syncd_applied_revision 42\n", "keyauth_syncd_events_total 3\n",
                             "keyauth_syncd_rebuilds_total 1\n", "keyauth_syncd_etcd_up 1\n",
                             "keyauth_syncd_apply_errors_total 1\n", "\nkeyauth_syncd_lag_seconds "}) {
        EXPECT_NE(r.body.find(line), std::string::npos) << line << r.body;
    }
    for (const char *name : {"keyauth_syncd_applied_revision", "keyauth_syncd_lag_seconds",
                             "keyauth_syncd_events_total", "keyauth_syncd_rebuilds_total",
                             "keyauth_syncd_etcd_up", "keyauth_syncd_apply_errors_total",
                             "keyauth_syncd_apply_blocked"}) {
        EXPECT_NE(r.body.find(std::string("# HELP ") + name + " "), std::string::npos) << name;
        EXPECT_NE(r.body.find(std::string("# TYPE ") + name + " "), std::string::npos) << name;
    }

    get.path = "/other";
    EXPECT_EQ(m.handle(get).status, 404);
    get.path = "/metrics";
    get.method = "POST";
    EXPECT_EQ(m.handle(get).status, 405);
}

// ---- the mirror ----------------------------------------------------------

TEST(SyncdMirror, NoStoreAppearsAtThePathBeforeACompleteSnapshot) {
    TempDir dir;
    const std::string path = dir.sub("db");
    {
        Mirror m(path, 0);
        EXPECT_FALSE(m.mark());
        EXPECT_EQ(m.env(), nullptr);
        EXPECT_FALSE(std::filesystem::exists(path));
        auto rb = m.begin_rebuild();
        rb->add(some_records());
        EXPECT_FALSE(std::filesystem::exists(path)) << "a half-built store is never at PATH";
        m.finish_rebuild(std::move(rb), MirrorMark{12, 7});
        ASSERT_TRUE(m.mark());
        EXPECT_EQ(m.mark()->revision, 12);
        EXPECT_EQ(m.mark()->cluster_id, 7u);
        EXPECT_FALSE(std::filesystem::exists(m.rebuild_path()));
        // a new store's modes (lmdb_backend.h): the workers' group only reads
        EXPECT_EQ(kt::mode_of(path), 02750u);
        EXPECT_EQ(kt::mode_of(path + "/data.mdb"), 0640u);
        EXPECT_EQ(kt::mode_of(path + "/lock.mdb"), 0660u);
    }
    Mirror again(path, 0);  // the mark was written with the records
    ASSERT_TRUE(again.mark());
    EXPECT_EQ(again.mark()->revision, 12);
    EXPECT_EQ(again.mark()->cluster_id, 7u);

    TempDir ref;
    EXPECT_EQ(kt::without_mark(kt::dump_env(again.env())), kt::applied(some_records(), ref.sub("db")));
}

TEST(SyncdMirror, AnEmptyDirectoryAtThePathIsReplacedWhole) {
    TempDir dir;
    const std::string path = dir.sub("db");
    ASSERT_EQ(::mkdir(path.c_str(), 02770), 0);
    Mirror m(path, 0);
    EXPECT_FALSE(m.mark());
    EXPECT_FALSE(std::filesystem::exists(path + "/data.mdb")) << "never opened empty";
    rebuild_with(m, some_records(), 3);
    EXPECT_TRUE(std::filesystem::exists(path + "/data.mdb"));
    EXPECT_FALSE(std::filesystem::exists(m.rebuild_path()));
}

TEST(SyncdMirror, ApplyingTheSameBatchTwiceLeavesTheStoreAsOnce) {
    TempDir dir;
    Mirror m(dir.sub("db"), 0);
    rebuild_with(m, some_records(), 10);
    std::vector<RecordChange> batch = {
        {Table::kKeysByHash, kt::test_hash(1), kt::key_record(10, 1, /*revoked=*/true)},  // revoke
        {Table::kKeysByHash, kt::test_hash(2), std::nullopt},                               // delete
        {Table::kKeysByHash, kt::test_hash(3), kt::key_record(12, 1)},                      // create
        {Table::kPlans, "basic", std::nullopt},
    };
    m.apply(batch, 14);
    const Dump once = kt::dump_env(m.env());
    m.apply(batch, 14);
    EXPECT_EQ(kt::dump_env(m.env()), once);
    EXPECT_EQ(m.mark()->revision, 14);

    // the derived tables follow the records
    EXPECT_EQ(once.at(KA_DB_KEYS).count(kt::id_bytes(kt::test_id(11))), 0u);
    EXPECT_EQ(once.at(KA_DB_KEYS).at(kt::id_bytes(kt::test_id(12))), kt::test_hash(3));
    EXPECT_EQ(once.at(KA_DB_META).at(KA_META_SYNCD_REVISION), kt::u64_le(14));

    m.apply({}, 9);  // never back
    EXPECT_EQ(m.mark()->revision, 14);
    m.apply({}, 20);  // a batch of skipped events still advances
    EXPECT_EQ(m.mark()->revision, 20);
    Mirror reopened(dir.sub("db"), 0);
    EXPECT_EQ(reopened.mark()->revision, 20);
}

TEST(SyncdMirror, ARefusedBatchAppliesNothingAndKeepsTheRevision) {
    TempDir dir;
    Mirror m(dir.sub("db"), 0);
    rebuild_with(m, some_records(), 10);
    const Dump before = kt::dump_env(m.env());
    std::vector<RecordChange> batch = {
        {Table::kPlans, "pro", kt::plan_record("pro", 99900)},
        {Table::kKeysByHash, kt::test_hash(9), kt::unknown_layout_key_record()},
    };
    EXPECT_THROW(m.apply(batch, 11), StoreError);
    EXPECT_EQ(kt::dump_env(m.env()), before);
    EXPECT_EQ(m.mark()->revision, 10);
}

// A writer of a newer build that moved the edge's store to another schema
// under this syncd: every batch is refused as unavailable, naming the schema,
// with nothing written, and looking for the record to blame throws nothing.
TEST(SyncdMirror, AStoreMovedToAnotherSchemaUnderItRefusesEveryBatch) {
    TempDir dir;
    Mirror m(dir.sub("db"), 0);
    rebuild_with(m, some_records(), 10);
    keyauth::testing::put_behind_writers(m.env(), KA_DB_META, KA_META_SCHEMA_VERSION, keyauth::testing::kSchemaNine);
    const Dump before = kt::dump_env(m.env());
    const std::vector<RecordChange> batch = {{Table::kPlans, "pro", kt::plan_record("pro", 99900)}};
    try {
        m.apply(batch, 11);
        ADD_FAILURE() << "a batch applied at schema 9";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kUnavailable);
        EXPECT_NE(std::string(e.what()).find("schema 9"), std::string::npos) << e.what();
    }
    EXPECT_EQ(m.refused(batch), std::nullopt);  // no record of the batch is to blame
    EXPECT_EQ(kt::dump_env(m.env()), before);
    EXPECT_EQ(m.mark()->revision, 10);
}

TEST(SyncdMirror, ARebuildLeftOverIsRemoved) {
    TempDir dir;
    const std::string path = dir.sub("db");
    {
        Mirror m(path, 0);
        rebuild_with(m, some_records(), 5);
    }
    const std::string leftover = path + ".rebuild";
    ASSERT_EQ(::mkdir(leftover.c_str(), 0700), 0);
    std::ofstream(leftover + "/data.mdb") << "half a store";
    Mirror m(path, 0);
    EXPECT_FALSE(std::filesystem::exists(leftover));
    ASSERT_TRUE(m.mark());
    EXPECT_EQ(m.mark()->revision, 5);

    // and one that appears later is cleared by the next rebuild
    ASSERT_EQ(::mkdir(leftover.c_str(), 0700), 0);
    std::ofstream(leftover + "/junk") << "x";
    rebuild_with(m, some_records(), 6);
    EXPECT_FALSE(std::filesystem::exists(leftover));
    EXPECT_EQ(m.mark()->revision, 6);
}

TEST(SyncdMirror, TheSwapKeepsOldReadersOnOldDataAndCopiesAccess) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror m(path, 0);
    rebuild_with(m, some_records(), 5);
    // the operator's choices for the live copy, which the new one must keep
    ASSERT_EQ(::chmod(path.c_str(), 02750), 0);
    ASSERT_EQ(::chmod((path + "/data.mdb").c_str(), 0640), 0);
    ASSERT_EQ(::chmod((path + "/lock.mdb").c_str(), 0660), 0);
    const ino_t data_before = kt::inode_of(path + "/data.mdb");
    const ino_t lock_before = kt::inode_of(path + "/lock.mdb");

    kt::Reader old_reader(path);
    ASSERT_TRUE(old_reader.ok());
    old_reader.hold();
    const Dump old_view = old_reader.held();
    ASSERT_EQ(old_view.at(KA_DB_PLANS).count("basic"), 1u);

    std::vector<RecordChange> next = {
        {Table::kPlans, "pro", kt::plan_record("pro", 99900)},
        {Table::kAccounts, kt::id_bytes(kt::test_id(2)), kt::account_record("other")},
    };
    rebuild_with(m, next, 50);

    EXPECT_EQ(old_reader.held(), old_view) << "a snapshot taken before the swap is undisturbed";
    EXPECT_NE(kt::inode_of(path + "/data.mdb"), data_before) << "nginx workers notice the new inode";
    EXPECT_NE(kt::inode_of(path + "/lock.mdb"), lock_before);
    kt::Reader new_reader(path);
    ASSERT_TRUE(new_reader.ok());
    const Dump new_view = new_reader.now();
    EXPECT_EQ(new_view.at(KA_DB_PLANS).count("basic"), 0u);
    EXPECT_EQ(new_view.at(KA_DB_PLANS).count("pro"), 1u);
    TempDir ref;
    EXPECT_EQ(kt::without_mark(new_view), kt::applied(next, ref.sub("db")));

    EXPECT_EQ(kt::mode_of(path), 02750u);
    EXPECT_EQ(kt::mode_of(path + "/data.mdb"), 0640u);
    EXPECT_EQ(kt::mode_of(path + "/lock.mdb"), 0660u);
    EXPECT_FALSE(std::filesystem::exists(m.rebuild_path())) << "the old copy is deleted";
    EXPECT_EQ(m.mark()->revision, 50);
}

TEST(SyncdMirror, AnAbandonedRebuildLeavesTheLiveStoreAndNoDirectory) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror m(path, 0);
    rebuild_with(m, some_records(), 5);
    const Dump before = kt::dump_env(m.env());
    {
        auto rb = m.begin_rebuild();
        rb->add({{Table::kPlans, "pro", kt::plan_record("pro", 99900)}});
        EXPECT_THROW(rb->add({{Table::kKeysByHash, kt::test_hash(9), kt::unknown_layout_key_record()}}),
                     StoreError);
    }
    EXPECT_FALSE(std::filesystem::exists(m.rebuild_path()));
    EXPECT_EQ(kt::dump_env(m.env()), before);
    EXPECT_EQ(m.mark()->revision, 5);
}

TEST(SyncdMirror, TheEdgeStoreSeesTheSwapAsStaleAndOpensTheNewStore) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror m(path, 0);
    rebuild_with(m, some_records(), 5);
    std::string err;
    auto edge = EdgeStore::open(path, err);
    ASSERT_NE(edge, nullptr) << err;
    EXPECT_EQ(edge->stale(), nullptr) << edge->stale();
    m.apply({{Table::kPlans, "pro", kt::plan_record("pro", 99900)}}, 6);
    EXPECT_EQ(edge->stale(), nullptr) << "a batch is a transaction, not a new store: " << edge->stale();
    rebuild_with(m, some_records(), 9);
    EXPECT_NE(edge->stale(), nullptr) << "an nginx worker reopens after a swap";
    edge.reset();
    edge = EdgeStore::open(path, err);
    ASSERT_NE(edge, nullptr) << "the rebuilt store opens as an edge store: " << err;
}
