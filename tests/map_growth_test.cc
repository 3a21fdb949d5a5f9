// Writers grow a full map themselves (admin/lib/lmdb_map.h): a store made
// with a small map takes writes past it, readers on other threads and in
// other processes (the edge) follow, and a map that cannot grow says which
// store, how big and what to do.
#include <gtest/gtest.h>
#include <lmdb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "edge_store.h"
#include "lmdb_map.h"
#include "sha256.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

Id roomy_account(Store &store) {
    AccountChanges many;
    many.max_keys = 100000;
    return store.create_account("a", 10, many).account.id;
}

size_t map_bytes(Store &store) { return static_cast<size_t>(*store.gauges().map_bytes); }

size_t count_keys(Store &store, const Id &acc) {
    size_t n = 0;
    std::optional<Id> after;
    do {
        KeyPage page = store.list_keys(acc, 1000, after);
        n += page.keys.size();
        after = page.next;
    } while (after);
    return n;
}

}  // namespace

TEST(MapGrowth, WritesPastASmallMapGrowItAndEveryKeyReads) {
    TempDir dir;
    const std::string path = dir.sub("db");
    std::vector<Id> made;
    Id acc;
    {
        Store store(path, kMiB);
        acc = roomy_account(store);
        // one transaction four times the map: it grows more than once
        for (const CreatedKey &k : store.create_keys(acc, "bulk", {"ip:read"}, 10, 16000))
            made.push_back(k.key.key_id);
        // and small ones, one of which fills the grown map in turn
        const size_t grown = map_bytes(store);
        EXPECT_GT(grown, 4 * kMiB);
        while (map_bytes(store) == grown) made.push_back(store.create_key(acc, "one", {"ip:read"}, 10).key.key_id);
        EXPECT_GT(map_bytes(store), grown);
        for (const Id &id : made) ASSERT_TRUE(store.find_key(id)) << "key " << made.size();
    }
    Store again(path);  // the grown map was recorded with the data
    EXPECT_GT(map_bytes(again), 4 * kMiB);
    EXPECT_EQ(count_keys(again, acc), made.size());
}

TEST(MapGrowth, AMapThatCannotGrowNamesTheStoreItsSizeAndMapSize) {
    TempDir dir;
    const std::string path = dir.sub("db");
    auto backend = std::make_unique<LmdbBackend>(path, kMiB);
    backend->map().set_limit(2 * kMiB);  // as a disk with room for 2 MiB would
    Store store(std::move(backend));
    const Id acc = roomy_account(store);
    size_t made = 0;
    std::string error;
    for (int i = 0; i < 100000 && error.empty(); i++) {
        try {
            store.create_key(acc, "k", {"ip:read"}, 10);
            made++;
        } catch (const MapFullError &e) {
            error = e.what();
        }
    }
    ASSERT_FALSE(error.empty()) << "never full";
    EXPECT_EQ(map_bytes(store), 2 * kMiB);
    EXPECT_NE(error.find("the store at " + path + " is full"), std::string::npos) << error;
    EXPECT_NE(error.find("its map is 2 MiB"), std::string::npos) << error;
    EXPECT_NE(error.find("2 MiB at most"), std::string::npos) << error;
    EXPECT_NE(error.find("--map-size"), std::string::npos) << error;
    EXPECT_EQ(error.find("MDB_"), std::string::npos) << error;
    EXPECT_GT(made, 100u);
    EXPECT_EQ(count_keys(store, acc), made);
}

TEST(MapGrowth, ReadersOnOtherThreadsGoOnWhileTheMapGrows) {
    TempDir dir;
    Store store(dir.sub("db"), kMiB);
    const Id acc = roomy_account(store);
    const Id first = store.create_key(acc, "first", {"ip:read"}, 10).key.key_id;
    std::atomic<bool> done{false};
    std::atomic<long> reads{0}, misses{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 3; t++) {
        readers.emplace_back([&] {
            while (!done) {
                if (!store.find_key(first)) misses++;
                (void)store.list_keys(acc, 50, std::nullopt);
                (void)store.gauges();
                reads++;
            }
        });
    }
    for (int i = 0; i < 12; i++) store.create_keys(acc, "batch", {"ip:read"}, 10, 500);
    done = true;
    for (auto &t : readers) t.join();
    EXPECT_GE(map_bytes(store), 4 * kMiB);
    EXPECT_GT(reads.load(), 0);
    EXPECT_EQ(misses.load(), 0);
    EXPECT_EQ(count_keys(store, acc), 6001u);
}

// Another process (keyauthctl beside keyauthd, syncd beside nginx) grows
// the map past this one's: writes `count` keys in a child with its own
// environment, and returns their secrets.
std::vector<std::string> grow_in_another_process(const std::string &path, const Id &acc, size_t count,
                                                 const std::string &secrets) {
    pid_t child = fork();
    if (child < 0) return {};
    if (child == 0) {
        try {
            Store other(path, kMiB);
            std::ofstream out(secrets);
            for (const CreatedKey &k : other.create_keys(acc, "other", {"ip:read"}, 10, count)) out << k.secret << "\n";
            out.close();
            _exit(out ? 0 : 1);
        } catch (...) {
            _exit(2);
        }
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        ADD_FAILURE() << "the other process failed: " << status;
        return {};
    }
    std::ifstream in(secrets);
    std::vector<std::string> made;
    for (std::string line; std::getline(in, line);) made.push_back(line);
    return made;
}

TEST(MapGrowth, AMapAnotherProcessGrewIsFollowedByThisOnesWritersAndReaders) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Store mine(path, kMiB);
    const Id acc = roomy_account(mine);
    ASSERT_EQ(grow_in_another_process(path, acc, 6000, dir.sub("secrets")).size(), 6000u);
    EXPECT_NO_THROW(mine.create_keys(acc, "mine", {"ip:read"}, 10, 100));  // a write adopts the map
    ASSERT_EQ(grow_in_another_process(path, acc, 6000, dir.sub("secrets")).size(), 6000u);
    EXPECT_EQ(count_keys(mine, acc), 12100u);  // and so does a read
    EXPECT_GT(map_bytes(mine), 4 * kMiB);
}

// The edge holds a snapshot of the small map; the data file outgrows it.
TEST(MapGrowth, TheEdgeFollowsAMapAnotherProcessGrew) {
    TempDir dir;
    const std::string path = dir.sub("db");
    Id acc;
    {
        Store setup(path, kMiB);
        acc = roomy_account(setup);
    }
    std::string err;
    auto edge = EdgeStore::open(path, err);
    ASSERT_TRUE(edge) << err;
    {
        EdgeStore::Snapshot before(*edge);
        ASSERT_EQ(before.begin(), 0);
    }
    const std::vector<std::string> made = grow_in_another_process(path, acc, 6000, dir.sub("secrets"));
    ASSERT_EQ(made.size(), 6000u);
    EdgeStore::Snapshot snap(*edge);
    ASSERT_EQ(snap.begin(), 0);
    for (const std::string &secret : made) {
        Digest h = sha256(secret);
        ASSERT_EQ(snap.find_key(h.data()).rc, 0) << "the edge misses a key";
    }
}
