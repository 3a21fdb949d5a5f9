// The copy GET /snapshot serves and a new edge swaps in (snapshot_copy.h,
// Mirror::begin_copy/finish_copy): the head line's grammar, a copy that
// holds exactly the store and announces exactly its own mark even while
// batches are applied beside it, and a received copy that is swapped in
// only when it opens and carries the mark its head announced.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "mirror.h"
#include "snapshot_copy.h"
#include "syncd_fixtures.h"
#include "temp_dir.h"

using namespace keyauth;
using namespace keyauth::syncd;
namespace kt = keyauth::testing;
using kt::TempDir;

namespace {

std::vector<RecordChange> records_of(unsigned n) {
    std::vector<RecordChange> out = {
        {Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acme")},
        {Table::kPlans, "basic", kt::plan_record("basic", 49900)},
    };
    for (unsigned i = 1; i <= n; i++) out.push_back({Table::kKeysByHash, kt::test_hash(i), kt::key_record(10 + i, 1)});
    return out;
}

void build(Mirror &m, const std::vector<RecordChange> &changes, int64_t revision, uint64_t cluster = 7) {
    auto rb = m.begin_rebuild();
    rb->add(changes);
    m.finish_rebuild(std::move(rb), MirrorMark{revision, cluster});
}

// What `keyauth-syncd --snapshot-copy dir` writes, made in a child process
// (an LMDB environment is never opened twice in one process): its exit
// code and its output.
int copy_in_child(const std::string &dir, std::string &out) {
    int fds[2];
    if (::pipe(fds) != 0) return -1;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        std::string error;
        ::_exit(write_snapshot_copy(dir, fds[1], error));
    }
    ::close(fds[1]);
    out.clear();
    char buf[65536];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The head and the data.mdb of a copy's output.
std::pair<std::optional<SnapshotHead>, std::string> split_copy(const std::string &out) {
    const size_t eol = out.find('\n');
    if (eol == std::string::npos) return {std::nullopt, ""};
    return {parse_snapshot_head(std::string_view(out).substr(0, eol)), out.substr(eol + 1)};
}

void write_file(const std::string &path, const std::string &bytes, mode_t mode) {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
    f.close();
    ::chmod(path.c_str(), mode);
}

}  // namespace

TEST(SnapshotHead, RoundTripsAndRefusesAnythingElse) {
    const SnapshotHead h{123456789, 18446744073709551615u, 3};
    const std::string line = snapshot_head_line(h);
    ASSERT_EQ(line.back(), '\n');
    auto back = parse_snapshot_head(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->revision, h.revision);
    EXPECT_EQ(back->cluster_id, h.cluster_id);
    EXPECT_EQ(back->schema_version, h.schema_version);
    for (const char *bad : {"", "keyauth-snapshot", "keyauth-snapshot 1 2", "keyauth-snapshot 1 2 3 4",
                            "keyauth-snapshot -1 2 3", "keyauth-snapshot 1 -2 3", "keyauth-snapshot 1 2 x",
                            "keyauth-snapshot  1 2 3", "keyauth-snapshot 1 2 3 ", "other 1 2 3",
                            "keyauth-snapshot 1 18446744073709551616 3", "keyauth-snapshot 1 2 4294967296",
                            "keyauth-snapshot 9223372036854775808 2 3", "keyauth-snapshot +1 2 3"}) {
        EXPECT_FALSE(parse_snapshot_head(bad)) << bad;
    }
}

TEST(SnapshotCopy, HoldsTheStoreAndItsOwnMark) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror m(path, 0);
    build(m, records_of(300), 41, 9);
    std::string out;
    ASSERT_EQ(copy_in_child(path, out), 0);
    auto [head, data] = split_copy(out);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->revision, 41);
    EXPECT_EQ(head->cluster_id, 9u);
    EXPECT_EQ(head->schema_version, KA_SCHEMA_VERSION);

    // received by another edge, as --bootstrap-from does
    Mirror other(dir.sub("other"), 0);
    auto copy = other.begin_copy();
    EXPECT_FALSE(std::filesystem::exists(dir.sub("other"))) << "the copy is received beside PATH";
    write_file(other.copy_file(), data, other.copy_mode());
    std::string why;
    ASSERT_TRUE(other.finish_copy(std::move(copy), MirrorMark{41, 9}, why)) << why;
    ASSERT_TRUE(other.mark());
    EXPECT_EQ(other.mark()->revision, 41);
    EXPECT_EQ(kt::dump_env(other.env()), kt::dump_env(m.env()));
    EXPECT_FALSE(std::filesystem::exists(other.rebuild_path()));
    EXPECT_EQ(kt::mode_of(dir.sub("other") + "/data.mdb"), 0640u);

    // and it follows the watch from there
    other.apply({{Table::kKeysByHash, kt::test_hash(1), kt::key_record(11, 1, /*revoked=*/true)}}, 42);
    EXPECT_EQ(other.mark()->revision, 42);
}

TEST(SnapshotCopy, RefusesWhatIsNotACompleteMirror) {
    TempDir dir;
    std::string out;
    EXPECT_EQ(copy_in_child(dir.sub("none"), out), 1);
    EXPECT_TRUE(out.empty());
    EXPECT_FALSE(std::filesystem::exists(dir.sub("none"))) << "never makes a store";
    {
        LmdbBackend plain(dir.sub("plain"));  // a store syncd never completed: no mark
    }
    EXPECT_EQ(copy_in_child(dir.sub("plain"), out), 1);
    EXPECT_TRUE(out.empty());
}

TEST(SnapshotCopy, TheHeadIsTheCopysMarkWhileBatchesAreApplied) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror m(path, 0);
    build(m, records_of(2000), 100);
    std::atomic<bool> stop{false};
    std::atomic<int64_t> applied{100};
    std::thread writer([&] {  // syncd's watch, applying all along
        for (unsigned i = 1; !stop; i++) {
            const unsigned key = 1 + i % 2000;
            m.apply({{Table::kKeysByHash, kt::test_hash(key), kt::key_record(10 + key, 1, i % 2 == 1)}}, 100 + i);
            applied = 100 + i;
        }
    });
    std::set<int64_t> seen;
    for (int round = 0; round < 12; round++) {
        std::string out;
        ASSERT_EQ(copy_in_child(path, out), 0);
        auto [head, data] = split_copy(out);
        ASSERT_TRUE(head);
        TempDir got;
        std::filesystem::create_directory(got.sub("db"));
        write_file(got.sub("db") + "/data.mdb", data, 0640);
        lmdb::env env = lmdb::env::create();
        env.set_max_dbs(64);
        env.open(got.sub("db").c_str(), MDB_RDONLY, 0640);
        auto txn = lmdb::txn::begin(env, nullptr, MDB_RDONLY);
        const kt::Dump d = kt::dump_txn(txn.handle());
        EXPECT_EQ(d.at(KA_DB_META).at(KA_META_SYNCD_REVISION), kt::u64_le(static_cast<uint64_t>(head->revision)))
            << "round " << round;
        // the key the batch of that revision wrote is as that batch left it
        if (head->revision > 100) {
            const unsigned i = static_cast<unsigned>(head->revision - 100), key = 1 + i % 2000;
            EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).at(kt::test_hash(key)), kt::key_record(10 + key, 1, i % 2 == 1));
        }
        seen.insert(head->revision);
    }
    stop = true;
    writer.join();
    EXPECT_GT(seen.size(), 1u) << "the copies were taken while batches were applied";
}

TEST(SnapshotCopy, AReceivedCopyIsSwappedInOnlyIfItOpensWithItsAnnouncedMark) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Mirror src(dir.sub("src"), 0);
    build(src, records_of(10), 50);
    std::string out;
    ASSERT_EQ(copy_in_child(dir.sub("src"), out), 0);
    const std::string data = split_copy(out).second;

    Mirror m(path, 0);
    build(m, records_of(3), 20);
    const kt::Dump before = kt::dump_env(m.env());
    std::string why;
    {
        auto copy = m.begin_copy();
        write_file(m.copy_file(), data, m.copy_mode());
        EXPECT_FALSE(m.finish_copy(std::move(copy), MirrorMark{51, 7}, why));
        EXPECT_NE(why.find("mark"), std::string::npos) << why;
    }
    {
        auto copy = m.begin_copy();
        write_file(m.copy_file(), std::string(8192, 'x'), m.copy_mode());  // not an LMDB file
        EXPECT_FALSE(m.finish_copy(std::move(copy), MirrorMark{50, 7}, why));
        EXPECT_NE(why.find("cannot be opened"), std::string::npos) << why;
    }
    EXPECT_EQ(kt::dump_env(m.env()), before) << "the live store is as it was";
    EXPECT_EQ(m.mark()->revision, 20);
    EXPECT_FALSE(std::filesystem::exists(m.rebuild_path())) << "a refused copy is removed";
    {
        auto copy = m.begin_copy();
        write_file(m.copy_file(), data, m.copy_mode());
        ASSERT_TRUE(m.finish_copy(std::move(copy), MirrorMark{50, 7}, why)) << why;
    }
    EXPECT_EQ(m.mark()->revision, 50);
    EXPECT_EQ(kt::dump_env(m.env()), kt::dump_env(src.env()));
}
