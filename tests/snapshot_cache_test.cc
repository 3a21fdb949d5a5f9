#include "snapshot_cache.h"

#include <gtest/gtest.h>

#include <array>

using keyauth::SnapshotCache;

namespace {
using Cache = SnapshotCache<4, 0, int>;
using Key = std::array<unsigned char, 4>;
}  // namespace

TEST(SnapshotCache, FindsWhatWasPutInTheSameGenerationOnly) {
    Cache c;
    Key a{1, 2, 3, 4};
    EXPECT_EQ(c.find(a.data(), 1), nullptr);
    c.put(a.data(), 1, 42);
    ASSERT_NE(c.find(a.data(), 1), nullptr);
    EXPECT_EQ(*c.find(a.data(), 1), 42);
    EXPECT_EQ(c.find(a.data(), 2), nullptr);  // a newer snapshot: read again
}

TEST(SnapshotCache, AnEmptySlotNeverMatchesAnAllZeroKey) {
    Cache c;
    Key zero{};
    EXPECT_EQ(c.find(zero.data(), 1), nullptr);
}

TEST(SnapshotCache, KeysSharingASlotReplaceEachOtherAndNeverMix) {
    Cache c;
    Key a{7, 0, 1, 1}, b{7, 0, 2, 2};  // the same slot bytes, other keys
    c.put(a.data(), 1, 1);
    c.put(b.data(), 1, 2);
    EXPECT_EQ(c.find(a.data(), 1), nullptr);
    ASSERT_NE(c.find(b.data(), 1), nullptr);
    EXPECT_EQ(*c.find(b.data(), 1), 2);
}
