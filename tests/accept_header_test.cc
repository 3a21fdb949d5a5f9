// The Accept header as the admin API's usage report reads it.
#include <gtest/gtest.h>

#include "accept_header.h"

using keyauth::accept_quality;

TEST(AcceptHeader, TheBestMatchingRangeGivesTheQuality) {
    EXPECT_EQ(accept_quality("", "text/csv"), 1) << "no header: anything goes";
    EXPECT_EQ(accept_quality("application/json", "text/csv"), 0);
    EXPECT_EQ(accept_quality("application/json", "application/json"), 1);
    EXPECT_EQ(accept_quality("Application/JSON", "application/json"), 1) << "types are case-insensitive";
    EXPECT_EQ(accept_quality("text/*;q=0.5, application/json", "text/csv"), 0.5);
    EXPECT_EQ(accept_quality("*/*;q=0.1, text/csv;q=0.8", "text/csv"), 0.8);
    EXPECT_EQ(accept_quality("*/*;q=0.1", "application/json"), 0.1);
    EXPECT_EQ(accept_quality("text/html, image/png", "text/csv"), 0);
    EXPECT_EQ(accept_quality("text/csv; charset=utf-8; q=0.3", "text/csv"), 0.3);
}

TEST(AcceptHeader, QZeroAndMalformedValuesAcceptNothing) {
    EXPECT_EQ(accept_quality("application/json;q=0", "application/json"), 0);
    EXPECT_EQ(accept_quality("application/json;q=2", "application/json"), 0);
    EXPECT_EQ(accept_quality("application/json;q=abc", "application/json"), 0);
    EXPECT_EQ(accept_quality("application/json;q=", "application/json"), 0);
    EXPECT_EQ(accept_quality("nonsense, ,;;,", "text/csv"), 0);
    EXPECT_EQ(accept_quality("textcsv", "text/csv"), 0);
}
