// A rebuild swaps a new store in at the edge's path (keyauth-syncd:
// renameat2 RENAME_EXCHANGE of the whole directory) while workers open it.
// Whatever instant the swaps land at (here many per open), an open succeeds,
// the handle holds one store's lock file and the same store's data file (a
// reader slot in one store's lock file would not protect pages of the
// other), and stale() tells the truth about it: false exactly while the path
// names the store it reads.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "edge_store.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

unsigned long long inode_of(const std::string &file) {
    struct stat st;
    return ::stat(file.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Inodes of the files this process maps now (/proc/self/maps, 5th column).
std::set<unsigned long long> mapped_inodes() {
    std::set<unsigned long long> out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        std::istringstream in(line);
        std::string range, perms, offset, dev;
        unsigned long long ino = 0;
        if (in >> range >> perms >> offset >> dev >> ino && ino != 0) out.insert(ino);
    }
    return out;
}

// Swaps two directories over and over, a few tens of microseconds apart
// (an open takes about as long), until told to stop; holds still while
// asked to, so that the test can look at a handle with the path at rest.
class Swapper {
public:
    Swapper(std::string a, std::string b) : a_(std::move(a)), b_(std::move(b)), thread_([this] { run(); }) {}
    ~Swapper() {
        stop_ = true;
        hold_ = false;
        thread_.join();
    }
    void hold() {
        hold_ = true;
        while (!held_) std::this_thread::yield();
    }
    void go() {
        hold_ = false;
        while (held_) std::this_thread::yield();
    }
    unsigned long swaps() const { return swaps_; }
    int error() const { return error_; }

private:
    void run() {
        std::minstd_rand rng(27);
        std::uniform_int_distribution<int> pause_us(0, 120);
        while (!stop_) {
            if (hold_) {
                held_ = true;
                while (hold_ && !stop_) std::this_thread::yield();
                held_ = false;
                continue;
            }
            if (::renameat2(AT_FDCWD, b_.c_str(), AT_FDCWD, a_.c_str(), RENAME_EXCHANGE) != 0) {
                error_ = errno;
                return;
            }
            swaps_++;
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(pause_us(rng));
            while (std::chrono::steady_clock::now() < until && !hold_) {
            }
        }
    }

    std::string a_, b_;
    std::atomic<bool> stop_{false}, hold_{false}, held_{false};
    std::atomic<unsigned long> swaps_{0};
    std::atomic<int> error_{0};
    std::thread thread_;
};

}  // namespace

TEST(EdgeStoreSwap, AnOpenRacingARebuildSwapHoldsOneStoreAndKnowsWhichOne) {
    TempDir dir;
    const std::string live = dir.sub("db"), rebuilt = dir.sub("db.rebuild");
    {
        Store a(live), b(rebuilt);  // closed before the race: only the handle maps them
        a.create_account("in the live store", 60);
        b.create_account("in the rebuilt store", 60);
    }
    struct Files {
        unsigned long long data, lock;
    };
    const Files stores[2] = {{inode_of(live + "/data.mdb"), inode_of(live + "/lock.mdb")},
                             {inode_of(rebuilt + "/data.mdb"), inode_of(rebuilt + "/lock.mdb")}};
    ASSERT_NE(stores[0].data, 0u);
    ASSERT_NE(stores[0].lock, 0u);
    ASSERT_NE(stores[1].data, 0u);
    ASSERT_NE(stores[1].lock, 0u);
    {
        std::string err;
        ASSERT_TRUE(EdgeStore::open(live, err)) << err;
        ASSERT_EQ(mapped_inodes().count(stores[0].lock), 0u) << "the handle is closed";
    }

    int opened = 0, opened_of[2] = {0, 0};
    Swapper swapper(live, rebuilt);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (int i = 0; i < 3000 && std::chrono::steady_clock::now() < deadline; i++) {
        std::string err;
        std::unique_ptr<EdgeStore> s = EdgeStore::open(live, err);
        swapper.hold();
        ASSERT_TRUE(s) << "attempt " << i << ": " << err;  // a swap is no reason to refuse
        opened++;
        const std::set<unsigned long long> mapped = mapped_inodes();
        int which = -1;  // the store whose files the handle maps: both of one
        for (int x = 0; x < 2; x++) {
            if (mapped.count(stores[x].data) && mapped.count(stores[x].lock)) which = x;
        }
        const int data_of = mapped.count(stores[0].data) ? 0 : mapped.count(stores[1].data) ? 1 : -1;
        const int lock_of = mapped.count(stores[0].lock) ? 0 : mapped.count(stores[1].lock) ? 1 : -1;
        ASSERT_NE(which, -1) << "attempt " << i << ": data.mdb of store " << data_of
                             << " with lock.mdb of store " << lock_of;
        opened_of[which]++;
        const int at_path = inode_of(live + "/data.mdb") == stores[0].data ? 0 : 1;
        const char *why = s->stale();
        ASSERT_EQ(why != nullptr, at_path != which)
            << "attempt " << i << ": the handle reads store " << which << ", the path names store "
            << at_path << " (" << (why ? why : "fresh") << ")";
        s.reset();
        swapper.go();
    }
    swapper.hold();
    ASSERT_EQ(swapper.error(), 0) << "renameat2: " << std::strerror(swapper.error());
    EXPECT_GT(swapper.swaps(), 100u);
    // both stores were opened: the swaps did land between the opens
    EXPECT_GT(opened_of[0], 0);
    EXPECT_GT(opened_of[1], 0);
    RecordProperty("opened", opened);
    RecordProperty("swaps", static_cast<int>(swapper.swaps()));
}
