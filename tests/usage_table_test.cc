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

namespace {

// 2027-01-15T12:00:00Z, an hour's start
constexpr int64_t kHourMs = 1'800'000'000'000 / 3'600'000 * 3'600'000 + 3'600'000;

uint64_t allowed_before(const std::vector<UsageDelta> &ds, int64_t t) {
    uint64_t n = 0;
    for (const auto &d : ds) n += d.last_used_ms < t ? d.allowed : 0;
    return n;
}

}  // namespace

// A key counted on both sides of an hour before the collector took its
// counts: the first count after the hour moves the earlier ones aside, so
// that the collector hands them on apart, each with a last use in its hour
// (a large zone's walk takes seconds: its late slots held calls of both
// hours, all filed in the hour before; #44 item 13).
TEST(UsageTable, CountsEitherSideOfAnHourAreHandedOnApart) {
    Table t(32);  // one probe window: every key may take any slot
    const Id k = key_n(5), quiet = key_n(6);
    for (int i = 0; i < 3; i++) t.count(k, true, kHourMs - 10'000 + i);
    t.count(quiet, true, kHourMs - 5'000);
    t.count(k, true, kHourMs + 1'000);
    t.count(k, false, kHourMs + 1'500);
    auto d = t.collect(kHourMs + 2'000);
    ASSERT_EQ(d.size(), 3u) << "k before the hour, k after it, quiet";
    EXPECT_EQ(allowed_before(d, kHourMs), 4u) << "3 of k and 1 of quiet before the hour";
    for (const auto &x : d) {
        if (key_of(x) != k) continue;
        if (x.last_used_ms < kHourMs) {
            EXPECT_EQ(x.allowed, 3u);
            EXPECT_EQ(x.rate_limited, 0u);
            EXPECT_EQ(x.last_used_ms, kHourMs - 10'000 + 2);
        } else {
            EXPECT_EQ(x.allowed, 1u);
            EXPECT_EQ(x.rate_limited, 1u);
            EXPECT_EQ(x.last_used_ms, kHourMs + 1'500);
        }
    }
    EXPECT_TRUE(t.collect(kHourMs + 3'000).empty()) << "each count handed on once";
    // the slot the earlier counts waited in is free again: the table's room
    // is the keys', not twice as many (k and quiet hold 2 of the 32)
    for (uint64_t n = 100; n < 100 + 30; n++) EXPECT_TRUE(t.count(key_n(n), true, kHourMs + 4'000).counted) << n;
    EXPECT_FALSE(t.count(key_n(200), true, kHourMs + 4'000).counted) << "and no more";
    // a key whose counts were all taken before the hour crosses it as it is
    t.collect(kHourMs + 5'000 + kIdleMs);  // the 30 idle keys' slots freed
    t.count(k, true, kHourMs + 3'599'000);
    t.collect(kHourMs + 3'599'500);
    t.count(k, true, kHourMs + 3'601'000);
    d = t.collect(kHourMs + 3'602'000);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].last_used_ms, kHourMs + 3'601'000);
}

// Threads count keys across an hour (each key's calls in order, as one
// client's) while another collects: every count is handed on once, in the
// hour it was made.
TEST(UsageTable, ConcurrentCountsAcrossAnHourAreFiledInTheirHour) {
    Table t(4096);
    constexpr int kThreads = 8, kPerKey = 2'000, kKeysPerThread = 6;
    std::atomic<int> running{kThreads};
    uint64_t before = 0, after = 0;
    auto fold = [&](const std::vector<UsageDelta> &ds) {
        for (const auto &d : ds) (d.last_used_ms < kHourMs ? before : after) += d.allowed;
    };
    std::vector<std::thread> threads;
    for (int th = 0; th < kThreads; th++) {
        threads.emplace_back([&, th] {
            for (int i = 0; i < kPerKey; i++) {
                const int64_t at = kHourMs - kPerKey / 2 + i;  // half before the hour
                for (int k = 0; k < kKeysPerThread; k++) t.count(key_n(th * kKeysPerThread + k), true, at);
            }
            running--;
        });
    }
    while (running > 0) fold(t.collect(kHourMs));
    for (auto &th : threads) th.join();
    fold(t.collect(kHourMs + kPerKey));
    EXPECT_EQ(before, uint64_t{kThreads} * kKeysPerThread * (kPerKey / 2)) << "after: " << after;
    EXPECT_EQ(after, uint64_t{kThreads} * kKeysPerThread * (kPerKey / 2)) << "before: " << before;
    EXPECT_EQ(t.table->drops(), 0u);
}
