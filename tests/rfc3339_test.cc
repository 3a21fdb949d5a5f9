#include "rfc3339.h"

#include <gtest/gtest.h>

#include <random>

using keyauth::format_time;
using keyauth::parse_time;

TEST(Rfc3339, ParsesZuluOffsetsAndFractions) {
    EXPECT_EQ(parse_time("1970-01-01T00:00:00Z"), 0);
    EXPECT_EQ(parse_time("2026-11-21T23:59:01Z"), int64_t{1795305541} * 1000);
    EXPECT_EQ(parse_time("2026-11-21t23:59:01.123z"), int64_t{1795305541} * 1000 + 123);
    EXPECT_EQ(parse_time("2026-11-21T23:59:01.987654321Z"), int64_t{1795305541} * 1000 + 987);
    EXPECT_EQ(parse_time("2026-11-22T05:29:01.5+05:30"), int64_t{1795305541} * 1000 + 500);
    EXPECT_EQ(parse_time("2026-11-21T22:59:01-01:00"), int64_t{1795305541} * 1000);
    EXPECT_EQ(parse_time("2028-02-29T00:00:00Z"), int64_t{1835395200} * 1000);  // a leap day
    EXPECT_EQ(parse_time("2000-02-29T00:00:00Z"), int64_t{951782400} * 1000);   // 400-year rule
    EXPECT_EQ(parse_time("9999-12-31T23:59:59Z"), int64_t{253402300799} * 1000);
}

TEST(Rfc3339, RefusesImpossibleDatesAndOtherShapes) {
    for (const char *bad :
         {"2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
          "2026-00-10T00:00:00Z", "2026-13-10T00:00:00Z", "2026-01-00T00:00:00Z",
          "2026-01-32T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z",
          "2026-01-01T00:00:60Z", "1969-12-31T23:59:59Z", "1970-01-01T00:00:00+00:01",
          "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60", "2026-01-01T00:00:00",
          "2026-01-01 00:00:00Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00.1234567890Z",
          "2026-1-01T00:00:00Z", "+2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z ", "",
          "2026-01-01T00:00:00+0100"}) {
        EXPECT_FALSE(parse_time(bad).has_value()) << bad;
    }
    EXPECT_FALSE(parse_time(std::string(65, '1')).has_value());
}

TEST(Rfc3339, WhatIsFormattedParsesBack) {
    EXPECT_EQ(format_time(0), "1970-01-01T00:00:00.000Z");
    EXPECT_EQ(format_time(int64_t{1795305541} * 1000 + 7), "2026-11-21T23:59:01.007Z");
    std::mt19937_64 rng(3339);
    for (int i = 0; i < 10000; i++) {
        const int64_t ms = static_cast<int64_t>(rng() % (int64_t{253402300799} * 1000));
        EXPECT_EQ(parse_time(format_time(ms)), ms) << format_time(ms);
    }
}
