#include "gcra.h"

#include <gtest/gtest.h>

using namespace keyauth;

namespace {

constexpr uint64_t kStart = 1'000 * kNanosPerSecond;

// Admits as many requests as pass at one instant.
int burst_at(uint64_t &tat, uint64_t now, const GcraParams &p) {
    int n = 0;
    for (;;) {
        GcraDecision d = gcra_decide(tat, now, p);
        if (!d.allowed) return n;
        tat = d.new_tat;
        n++;
    }
}

}  // namespace

TEST(Gcra, BurstEqualsThePerMinuteNumber) {
    for (uint32_t rate : {1u, 2u, 30u, 600u, 60000u}) {
        GcraParams p = GcraParams::per_minute(rate);
        uint64_t tat = 0;
        EXPECT_EQ(burst_at(tat, kStart, p), static_cast<int>(rate)) << rate;
    }
}

TEST(Gcra, RemainingCountsDown) {
    GcraParams p = GcraParams::per_minute(5);
    uint64_t tat = 0;
    for (uint32_t expect = 4;; expect--) {
        GcraDecision d = gcra_decide(tat, kStart, p);
        ASSERT_TRUE(d.allowed);
        EXPECT_EQ(d.remaining, expect);
        tat = d.new_tat;
        if (expect == 0) break;
    }
    GcraDecision refused = gcra_decide(tat, kStart, p);
    EXPECT_FALSE(refused.allowed);
    EXPECT_EQ(refused.remaining, 0u);
    EXPECT_EQ(refused.retry_after_ns, 12 * kNanosPerSecond);  // one interval: 60 s / 5
    EXPECT_EQ(refused.reset_ns, 60 * kNanosPerSecond);
}

TEST(Gcra, SteadyRateIsOnePerInterval) {
    GcraParams p = GcraParams::per_minute(60);  // one per second
    uint64_t tat = 0;
    burst_at(tat, kStart, p);
    // Drained: now exactly one request per second passes, never two.
    for (int s = 1; s <= 120; s++) {
        uint64_t now = kStart + s * kNanosPerSecond;
        EXPECT_FALSE(gcra_decide(tat, now - 1, p).allowed && s > 0 && tat > now) << s;
        EXPECT_EQ(burst_at(tat, now, p), 1) << s;
    }
}

TEST(Gcra, RefusalSaysExactlyWhenToComeBack) {
    GcraParams p = GcraParams::per_minute(30);  // 2 s interval
    uint64_t tat = 0;
    burst_at(tat, kStart, p);
    GcraDecision d = gcra_decide(tat, kStart + 500'000'000, p);
    ASSERT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after_ns, 1'500'000'000u);
    EXPECT_EQ(ceil_seconds(d.retry_after_ns), 2u);
    EXPECT_FALSE(gcra_decide(tat, kStart + 500'000'000 + d.retry_after_ns - 1, p).allowed);
    EXPECT_TRUE(gcra_decide(tat, kStart + 500'000'000 + d.retry_after_ns, p).allowed);
}

TEST(Gcra, ClockNotMovingAdmitsOnlyTheBurst) {
    GcraParams p = GcraParams::per_minute(10);
    uint64_t tat = 0;
    EXPECT_EQ(burst_at(tat, kStart, p), 10);
    for (int i = 0; i < 100; i++) EXPECT_FALSE(gcra_decide(tat, kStart, p).allowed);
}

TEST(Gcra, ClockGoingBackwardsNeverAdmitsMore) {
    GcraParams p = GcraParams::per_minute(10);
    uint64_t tat = 0;
    burst_at(tat, kStart, p);
    EXPECT_EQ(burst_at(tat, kStart - kNanosPerSecond, p), 0);
}

TEST(Gcra, IdleStateIsLikeFresh) {
    GcraParams p = GcraParams::per_minute(10);
    uint64_t tat = 0;
    burst_at(tat, kStart, p);
    uint64_t later = tat;  // once now >= TAT, the full burst is back
    EXPECT_EQ(burst_at(tat, later, p), 10);
}

TEST(Gcra, WorstSixtySecondWindowIsTwiceTheRate) {
    GcraParams p = GcraParams::per_minute(30);
    uint64_t tat = 0;
    int admitted = 0;
    // A greedy client asking every 10 ms for one minute.
    for (uint64_t t = kStart; t < kStart + 60 * kNanosPerSecond; t += 10'000'000) {
        admitted += burst_at(tat, t, p);
    }
    // the burst of 30 at once, then one every 2 s: 29 more before 60 s
    EXPECT_EQ(admitted, 59);
}

TEST(Gcra, HugeAndTinyRates) {
    GcraParams tiny = GcraParams::per_minute(1);
    EXPECT_EQ(tiny.interval_ns, 60 * kNanosPerSecond);
    uint64_t tat = 0;
    EXPECT_EQ(burst_at(tat, kStart, tiny), 1);
    EXPECT_EQ(ceil_seconds(gcra_decide(tat, kStart, tiny).retry_after_ns), 60u);

    GcraParams huge = GcraParams::per_minute(1'000'000);
    EXPECT_EQ(huge.interval_ns, 60'000u);
    tat = 0;
    EXPECT_EQ(burst_at(tat, kStart, huge), 1'000'000);
    // then 1,000,000 more over the next minute, evenly
    int admitted = 0;
    for (uint64_t t = kStart; t <= kStart + 60 * kNanosPerSecond; t += 1'000'000) admitted += burst_at(tat, t, huge);
    EXPECT_NEAR(admitted, 1'000'000, 20);

    GcraParams max = GcraParams::per_minute(10'000'000);
    EXPECT_EQ(max.interval_ns, 6'000u);
}

TEST(Gcra, ZeroRateIsTreatedAsOne) {
    EXPECT_EQ(GcraParams::per_minute(0).interval_ns, 60 * kNanosPerSecond);
}

TEST(Gcra, ConfiguredBurst) {
    GcraParams p = GcraParams::per_minute(600, 1);
    uint64_t tat = 0;
    EXPECT_EQ(burst_at(tat, kStart, p), 1);
}
