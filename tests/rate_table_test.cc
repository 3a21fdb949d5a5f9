#include "rate_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ids.h"
#include "rate_table_memory.h"
#include "keyauth_core.h"

using namespace keyauth;

namespace {

constexpr uint64_t kNow = 5'000 * kNanosPerSecond;

struct Table : keyauth::testing::RateTableMemory {
    explicit Table(size_t slots) : RateTableMemory(slots) {}
    RateCheck check(const Id &id, uint32_t rate, uint64_t now = kNow) {
        return table->check(id.data(), GcraParams::per_minute(rate), now, lock);
    }
    int admitted(const Id &id, uint32_t rate, int tries, uint64_t now = kNow) {
        int n = 0;
        for (int i = 0; i < tries; i++) n += check(id, rate, now).decision.allowed;
        return n;
    }
};

Id id_n(uint64_t n) {
    Id id{};
    for (int i = 0; i < 12; i++) id[i] = static_cast<unsigned char>((n * 2654435761u) >> (i % 4 * 8)) ^ i;
    id[0] = static_cast<unsigned char>(n);
    id[11] = static_cast<unsigned char>(n >> 8);
    return id;
}

}  // namespace

TEST(RateTable, FormatAndAttach) {
    Table t(64);
    EXPECT_EQ(t.table->slots(), 64u);
    std::vector<unsigned char> junk(4096, 0xab);
    EXPECT_EQ(RateTable::attach(junk.data(), junk.size()), nullptr);
    EXPECT_EQ(RateTable::attach(t.mem.data(), t.mem.size() - RateTable::kSlotBytes), nullptr);
    std::vector<unsigned char> small(RateTable::kHeaderBytes + 4 * RateTable::kSlotBytes);
    EXPECT_FALSE(RateTable::format(small.data(), small.size()));
}

TEST(RateTable, SixtyFourBytesOrLessPerKey) {
    static_assert(RateTable::kSlotBytes <= 64, "rate state per key");
    EXPECT_EQ(RateTable::kSlotBytes, static_cast<size_t>(KA_RATE_BYTES_PER_KEY));
    // 1 MiB holds this many keys:
    EXPECT_EQ((1u << 20) / RateTable::kSlotBytes, 32768u);
}

TEST(RateTable, EachKeyHasItsOwnBudget) {
    Table t(1024);
    Id a = generate_id(1), b = generate_id(2);
    EXPECT_EQ(t.admitted(a, 30, 100), 30);
    EXPECT_EQ(t.admitted(b, 30, 100), 30);
    EXPECT_EQ(t.admitted(a, 30, 100), 0);
}

TEST(RateTable, CollidingKeysInOneProbeWindowStaySeparate) {
    Table t(RateTable::kProbe);  // every key lands in the same window
    std::vector<Id> ids;
    for (size_t i = 0; i < RateTable::kProbe; i++) ids.push_back(id_n(i + 1));
    for (auto &id : ids) EXPECT_EQ(t.admitted(id, 3, 10), 3);
    for (auto &id : ids) EXPECT_EQ(t.admitted(id, 3, 10), 0);
    EXPECT_EQ(t.table->busy_evictions(), 0u);
}

TEST(RateTable, FullTableReusesIdleStateFirstWithoutWarning) {
    Table t(RateTable::kProbe);
    for (size_t i = 0; i < RateTable::kProbe; i++) t.admitted(id_n(i + 1), 60, 1);
    // One minute later, every state is idle: a new key reuses one silently.
    RateCheck c = t.check(id_n(1000), 60, kNow + 61 * kNanosPerSecond);
    EXPECT_TRUE(c.decision.allowed);
    EXPECT_FALSE(c.evicted_busy);
    EXPECT_FALSE(c.warn);
}

TEST(RateTable, FullTableEvictsTheOldestBusyStateAndWarnsOncePerMinute) {
    Table t(RateTable::kProbe);
    auto fill = [&](uint64_t base, uint64_t first_id) {
        for (size_t i = 0; i < RateTable::kProbe; i++) {
            t.admitted(id_n(first_id + i), 60, 60, base + i * kNanosPerSecond);  // all busy
        }
    };
    fill(kNow, 1);
    RateCheck first = t.check(id_n(1000), 60, kNow + 20 * kNanosPerSecond);
    EXPECT_TRUE(first.decision.allowed) << "a full table never fails a request";
    EXPECT_TRUE(first.evicted_busy);
    EXPECT_TRUE(first.warn);
    t.admitted(id_n(1000), 60, 59, kNow + 20 * kNanosPerSecond);  // keep it busy
    RateCheck second = t.check(id_n(1001), 60, kNow + 21 * kNanosPerSecond);
    EXPECT_TRUE(second.evicted_busy);
    EXPECT_FALSE(second.warn) << "at most one warning a minute";
    // The oldest (smallest TAT) went first: key 16 kept its debt (53 s of
    // 59 s tolerance used), key 1 lost it and starts afresh.
    EXPECT_EQ(t.check(id_n(RateTable::kProbe), 60, kNow + 22 * kNanosPerSecond).decision.remaining, 6u);
    EXPECT_EQ(t.check(id_n(1), 60, kNow + 22 * kNanosPerSecond).decision.remaining, 59u);

    fill(kNow + 100 * kNanosPerSecond, 2000);
    RateCheck later = t.check(id_n(3000), 60, kNow + 120 * kNanosPerSecond);
    EXPECT_TRUE(later.evicted_busy);
    EXPECT_TRUE(later.warn) << "a minute later, the next warning is due";
    EXPECT_EQ(t.table->busy_evictions(), 3u);  // first, second, later
}

// A lock that counts how often the table takes it: a key that has its slot
// must be found without it, whatever happened to the slots before its own.
struct CountingLock {
    std::mutex mu;
    int taken = 0;
    RateLock lock{[](void *p) {
                      auto *c = static_cast<CountingLock *>(p);
                      c->mu.lock();
                      c->taken++;
                  },
                  [](void *p) { static_cast<CountingLock *>(p)->mu.unlock(); }, this};
};

TEST(RateTable, AKeyTakesTheLockOnlyTheFirstTime) {
    Table t(1024);
    CountingLock l;
    const GcraParams p = GcraParams::per_minute(1000);
    for (uint64_t k = 1; k <= 200; k++) t.table->check(id_n(k).data(), p, kNow, l.lock);
    EXPECT_EQ(l.taken, 200);
    for (int round = 0; round < 3; round++) {
        for (uint64_t k = 1; k <= 200; k++) {
            EXPECT_TRUE(t.table->check(id_n(k).data(), p, kNow, l.lock).decision.allowed);
        }
    }
    EXPECT_EQ(l.taken, 200) << "every key found again without the lock";
}

TEST(RateTable, KeysBehindAHandedOverSlotAreStillFoundWithTheirState) {
    Table t(RateTable::kProbe);  // one window: every key probes every slot
    CountingLock l;
    const GcraParams p = GcraParams::per_minute(60);
    for (size_t i = 0; i < RateTable::kProbe; i++) {  // all busy, key 1 the oldest
        for (int r = 0; r < 30; r++) t.table->check(id_n(i + 1).data(), p, kNow + i * kNanosPerSecond, l.lock);
    }
    const uint64_t later = kNow + 20 * kNanosPerSecond;  // every TAT still ahead
    l.taken = 0;
    EXPECT_TRUE(t.table->check(id_n(1000).data(), p, later, l.lock).evicted_busy);
    EXPECT_EQ(l.taken, 1);
    // key 1's slot went to key 1000; the others kept theirs, wherever they
    // sit behind it, and are found without the lock with their debt
    for (size_t i = 1; i < RateTable::kProbe; i++) {
        RateCheck c = t.table->check(id_n(i + 1).data(), p, later, l.lock);
        EXPECT_FALSE(c.evicted_busy);
        EXPECT_LT(c.decision.remaining, 59u) << "key " << i + 1 << " lost its state";
    }
    EXPECT_EQ(l.taken, 1);
}

TEST(RateTable, RateChangesApplyToExistingState) {
    Table t(1024);
    Id a = generate_id(1);
    EXPECT_EQ(t.admitted(a, 10, 5), 5);  // 30 s of debt at 6 s per request
    // The entitlement drops to 5/min (12 s per request, 48 s tolerance): the
    // debt already taken counts, so 2 pass where a fresh key would get 5.
    EXPECT_EQ(t.admitted(a, 5, 10), 2);
}

TEST(RateTable, ConcurrentRequestsOfOneKeyLoseNoUpdate) {
    Table t(4096);
    Id a = generate_id(7);
    constexpr uint32_t kRate = 50'000;
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int th = 0; th < 8; th++) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20'000; i++) admitted += t.check(a, kRate).decision.allowed;
        });
    }
    for (auto &th : threads) th.join();
    // The clock does not move: exactly the burst passes, however they interleave.
    EXPECT_EQ(admitted.load(), static_cast<int>(kRate));
}

TEST(RateTable, ConcurrentInsertsOfManyKeys) {
    Table t(8192);
    std::atomic<int> admitted{0};
    std::vector<std::thread> threads;
    for (int th = 0; th < 4; th++) {
        threads.emplace_back([&] {
            for (uint64_t k = 1; k <= 2000; k++) admitted += t.check(id_n(k), 2).decision.allowed;
        });
    }
    for (auto &th : threads) th.join();
    EXPECT_EQ(admitted.load(), 2000 * 2);
}

TEST(RateCApi, EffectiveRateIsCappedByTheEntitlement) {
    Table t(1024);
    ka_auth_result_t key{};
    Id id = generate_id(3);
    std::memcpy(key.key_id_bin, id.data(), id.size());
    key.requested_rpm = 100;
    key.entitlement_rpm = 3;
    ka_lock_t lock{t.lock.lock, t.lock.unlock, t.lock.data};
    ka_rate_result_t r;
    int ok = 0;
    for (int i = 0; i < 10; i++) {
        ka_rate_check(t.mem.data(), &key, kNow, 0, &lock, &r);
        ok += r.allowed;
        EXPECT_EQ(r.limit, 3u);
    }
    EXPECT_EQ(ok, 3);
    EXPECT_EQ(r.retry_after_s, 20u);
    EXPECT_GE(ka_monotonic_ns(), 1u);
}

// A key's request racing with the eviction of its slot must not touch the
// state of the slot's new owner. Here the new owners (Y) may make exactly two
// requests, and one stray charge of an evicted key (X: 10 s a request, never
// refused) costs the second one; X keys are evicted all the time, Y keys
// taking their slots.
TEST(RateTable, ARequestRacingAnEvictionNeverChargesTheNewOwner) {
    Table t(RateTable::kProbe);
    const GcraParams x_params = GcraParams::per_minute(6, 1'000'000);
    const GcraParams y_params = GcraParams::per_minute(1, 2);
    std::atomic<bool> done{false};
    std::thread evicted([&] {
        for (uint64_t k = 1; !done.load(std::memory_order_relaxed); k++) {
            Id x = id_n(k << 20);
            for (int i = 0; i < 4; i++) t.table->check(x.data(), x_params, kNow, t.lock);
        }
    });
    int charged = 0;
    for (uint64_t k = 1; k <= 200'000; k++) {
        Id y = id_n(k);
        bool first = t.table->check(y.data(), y_params, kNow, t.lock).decision.allowed;
        bool second = t.table->check(y.data(), y_params, kNow, t.lock).decision.allowed;
        charged += !(first && second);
    }
    done = true;
    evicted.join();
    EXPECT_EQ(charged, 0);
}
