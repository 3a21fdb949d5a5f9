#include "usage_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "gcra.h"
#include "ids.h"

using namespace keyauth;

namespace {

UsageOutcome outcome(bool allowed) {
    return allowed ? UsageOutcome::kAllowed : UsageOutcome::kRateLimited;
}

constexpr int64_t kNowMs = 1'800'000'000'000;
constexpr int64_t kIdleMs = 300'000;

struct Table {
    explicit Table(size_t slots) : mem(UsageTable::kHeaderBytes + slots * UsageTable::kSlotBytes) {
        EXPECT_TRUE(UsageTable::format(mem.data(), mem.size()));
        table = UsageTable::attach(mem.data(), mem.size());
    }
    UsageCount count(const Id &key, bool allowed, int64_t now_ms = kNowMs) {
        return table->count(account.data(), key.data(), outcome(allowed), allowed ? 1 : 0, now_ms, 1, lock);
    }
    std::vector<UsageDelta> collect(int64_t now_ms = kNowMs) {
        std::vector<UsageDelta> out;
        table->collect(0, table->slots(), now_ms, kIdleMs, lock, [&](const UsageDelta &d) { out.push_back(d); });
        return out;
    }

    std::vector<unsigned char> mem;
    UsageTable *table;
    Id account{{'a', 'c', 'c'}};
    std::mutex mu;
    RateLock lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                  [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
};

Id key_n(uint64_t n) {
    Id id{};
    for (int i = 0; i < 12; i++) id[i] = static_cast<unsigned char>((n * 0x9e3779b97f4a7c15ULL) >> (i * 5 % 64));
    id[0] = static_cast<unsigned char>(n);
    id[1] = static_cast<unsigned char>(n >> 8);
    return id;
}

Id key_of(const UsageDelta &d) {
    Id id;
    std::memcpy(id.data(), d.key_id, KA_ID_LEN);
    return id;
}

}  // namespace

TEST(UsageTable, FormatNeedsRoomForOneProbeWindow) {
    std::vector<unsigned char> mem(UsageTable::kHeaderBytes + 8 * UsageTable::kSlotBytes);
    EXPECT_FALSE(UsageTable::format(mem.data(), mem.size()));
    Table t(100);
    EXPECT_EQ(t.table->slots(), 100u);
    EXPECT_EQ(UsageTable::attach(t.mem.data(), t.mem.size() - 1), nullptr);
}

TEST(UsageTable, CollectTakesTheDeltasAndLeavesZero) {
    Table t(64);
    const Id k = key_n(1);
    for (int i = 0; i < 3; i++) EXPECT_TRUE(t.count(k, true, kNowMs + i).counted);
    t.count(k, false, kNowMs + 10);
    t.count(k, false, kNowMs + 5);  // out of order: last use stays the latest
    auto d = t.collect();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(key_of(d[0]), k);
    EXPECT_EQ(0, std::memcmp(d[0].account_id, t.account.data(), KA_ID_LEN));
    EXPECT_EQ(d[0].allowed, 3u);
    EXPECT_EQ(d[0].rate_limited, 2u);
    EXPECT_EQ(d[0].last_used_ms, kNowMs + 10);
    EXPECT_TRUE(t.collect().empty()) << "collected once, never twice";
    t.count(k, true, kNowMs + 20);
    d = t.collect();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].allowed, 1u);
    EXPECT_EQ(d[0].rate_limited, 0u);
}

TEST(UsageTable, AFullTableCountsDropsAndWarnsOnceAMinute) {
    Table t(UsageTable::kProbe);  // every key's probe window is the whole table
    for (uint64_t i = 0; i < UsageTable::kProbe; i++) EXPECT_TRUE(t.count(key_n(i), true).counted);
    UsageCount c = t.table->count(t.account.data(), key_n(999).data(), outcome(true), 0, kNowMs, 100, t.lock);
    EXPECT_FALSE(c.counted);
    EXPECT_TRUE(c.warn);
    c = t.table->count(t.account.data(), key_n(999).data(), outcome(true), 0, kNowMs, 200, t.lock);
    EXPECT_FALSE(c.warn) << "not again within a minute";
    c = t.table->count(t.account.data(), key_n(998).data(), outcome(false), 0, kNowMs,
                       200 + 61 * kNanosPerSecond, t.lock);
    EXPECT_TRUE(c.warn);
    EXPECT_EQ(t.table->drops(), 3u);
    EXPECT_TRUE(t.count(key_n(0), true).counted) << "known keys still count";
}

TEST(UsageTable, IdleSlotsAreFreedOnlyOnceCollected) {
    Table t(UsageTable::kProbe);
    for (uint64_t i = 0; i < UsageTable::kProbe; i++) t.count(key_n(i), true, kNowMs);
    const int64_t later = kNowMs + kIdleMs + 1;
    t.count(key_n(0), true, later);  // key 0 stays in use
    auto d = t.collect(later);       // the deltas first: nothing freed with a count in it
    EXPECT_EQ(d.size(), UsageTable::kProbe);
    EXPECT_FALSE(t.count(key_n(500), true, later).counted);
    EXPECT_TRUE(t.collect(later).empty()) << "idle and empty: freed, nothing to hand on";
    EXPECT_TRUE(t.count(key_n(500), true, later).counted);
    t.count(key_n(0), false, later);
    d = t.collect(later);
    ASSERT_EQ(d.size(), 2u);
    std::map<Id, UsageDelta> by_key;
    for (auto &x : d) by_key[key_of(x)] = x;
    EXPECT_EQ(by_key[key_n(0)].allowed, 0u);
    EXPECT_EQ(by_key[key_n(0)].rate_limited, 1u);
    EXPECT_EQ(by_key[key_n(500)].allowed, 1u);
}

// A search stops at a slot that was never used, so a freed slot must not
// look like one: the keys behind it would each be given a second slot.
TEST(UsageTable, KeysBehindFreedSlotsAreFoundInTheirOwnSlot) {
    Table t(UsageTable::kProbe);  // one window: keys sit behind one another
    for (uint64_t i = 0; i < UsageTable::kProbe; i++) t.count(key_n(i), true, kNowMs);
    const int64_t later = kNowMs + kIdleMs + 1;
    for (uint64_t i = 0; i < UsageTable::kProbe; i += 2) t.count(key_n(i), true, later);
    EXPECT_EQ(t.collect(later).size(), UsageTable::kProbe);
    EXPECT_TRUE(t.collect(later).empty());  // the odd keys' slots are freed
    for (uint64_t i = 0; i < UsageTable::kProbe; i += 2) {
        for (int r = 0; r < 2; r++) EXPECT_TRUE(t.count(key_n(i), true, later).counted);
    }
    // exactly the freed slots are left for new keys
    for (uint64_t i = 0; i < UsageTable::kProbe / 2; i++) {
        EXPECT_TRUE(t.count(key_n(1000 + i), true, later).counted) << "new key " << i;
    }
    EXPECT_FALSE(t.count(key_n(5000), true, later).counted) << "the table is full";
    auto d = t.collect(later);
    ASSERT_EQ(d.size(), UsageTable::kProbe);
    std::map<Id, uint64_t> allowed;
    for (auto &x : d) allowed[key_of(x)] += x.allowed;
    for (uint64_t i = 0; i < UsageTable::kProbe; i += 2) EXPECT_EQ(allowed[key_n(i)], 2u) << "key " << i;
}

TEST(UsageTable, RestoreGivesDeltasBack) {
    Table t(64);
    t.count(key_n(7), true);
    auto d = t.collect();
    ASSERT_EQ(d.size(), 1u);
    t.count(key_n(7), false);
    t.table->restore(d[0], t.lock);
    d = t.collect();
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].allowed, 1u);
    EXPECT_EQ(d[0].rate_limited, 1u);
    UsageDelta gone = d[0];
    std::memcpy(gone.key_id, key_n(8).data(), KA_ID_LEN);  // no slot: a drop
    t.table->restore(gone, t.lock);
    EXPECT_EQ(t.table->drops(), 2u);
}

// Workers count while one collects: every request is collected exactly once.
TEST(UsageTable, ConcurrentCountsAndCollectionsLoseNothing) {
    Table t(4096);
    constexpr int kThreads = 8, kPerThread = 20'000, kKeys = 50;
    std::atomic<int> running{kThreads};
    std::map<Id, UsageDelta> sum;
    auto fold = [&](const std::vector<UsageDelta> &ds) {
        for (const auto &d : ds) {
            auto &s = sum[key_of(d)];
            s.allowed += d.allowed;
            s.rate_limited += d.rate_limited;
        }
    };
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; th++) {
        threads.emplace_back([&, th] {
            for (int i = 0; i < kPerThread; i++) t.count(key_n((th * 7 + i) % kKeys), i % 3 != 0);
            running--;
        });
    }
    while (running > 0) fold(t.collect());
    for (auto &th : threads) th.join();
    fold(t.collect());
    uint64_t allowed = 0, limited = 0;
    for (auto &[k, s] : sum) {
        allowed += s.allowed;
        limited += s.rate_limited;
    }
    EXPECT_EQ(sum.size(), size_t{kKeys});
    EXPECT_EQ(allowed + limited, uint64_t{kThreads} * kPerThread);
    EXPECT_EQ(limited, uint64_t{kThreads} * ((kPerThread + 2) / 3));
}
