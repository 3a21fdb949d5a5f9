// The pure parts of usage over time that GET /v1/usage and keyauthctl usage
// report share (admin/lib/usage_series): instants and dates, whole periods,
// the zero-filled series from bucket rows (every edge's added up), the JSON
// counts, the report's days and calendar months, CSV fields as RFC 4180
// writes them; and a usage source that cannot be read answers as every
// unreadable store does (503 STORE_UNAVAILABLE).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "console_api.h"
#include "lmdb_backend.h"
#include "rfc3339.h"
#include "store_error.h"
#include "temp_dir.h"
#include "usage_series.h"

using namespace keyauth;
using nlohmann::json;

namespace {

// 2026-11-20T09:00:00Z
constexpr int64_t kNine = 1795165200000;
const uint32_t kNineHour = static_cast<uint32_t>(kNine / kMsPerHour);
const uint32_t kDay = static_cast<uint32_t>(kNine / kMsPerDay);

Id id_of(uint8_t b) {
    Id id{};
    id.fill(b);
    return id;
}

// Hands out the rows it holds that match what was asked, as a source does;
// `stray` rows are handed out whatever the range (a source must not, but a
// reader must not write past its series if one does).
class FakeSource : public UsageSource {
public:
    std::vector<BucketRow> rows, stray;
    bool unavailable = false;
    struct Asked {
        Granularity g;
        uint32_t from, to;
        bool account, key;
    };
    std::vector<Asked> asked;

    std::map<Id, KeyUsage> usage_of(const Id &, const std::vector<Id> &) override { return {}; }
    void buckets(Granularity g, uint32_t from, uint32_t to, const Id *account, const Id *key,
                 const BucketSink &each) override {
        asked.push_back({g, from, to, account != nullptr, key != nullptr});
        if (unavailable) throw StoreError(StoreError::Kind::kUnavailable, "", "etcd: no member answers");
        for (const auto &r : rows) {
            if (r.period < from || r.period >= to) continue;
            if (account && r.account != *account) continue;
            if (key && r.key != *key) continue;
            each(r);
        }
        for (const auto &r : stray) each(r);
    }
};

BucketRow row(uint8_t account, uint8_t key, uint32_t period, BucketCounts c) {
    return BucketRow{id_of(account), id_of(key), period, c};
}

bool same(const BucketCounts &a, const BucketCounts &b) {
    return a.allowed == b.allowed && a.rate_limited == b.rate_limited && a.quota_exceeded == b.quota_exceeded &&
           a.units == b.units;
}

TEST(UsageInstant, DatesAndRfc3339Instants) {
    EXPECT_EQ(parse_usage_instant("2026-11-20T09:00:00Z"), kNine);
    EXPECT_EQ(parse_usage_instant("2026-11-20T09:00:00.000Z"), kNine);
    EXPECT_EQ(parse_usage_instant("2026-11-20T14:30:00+05:30"), kNine);
    EXPECT_EQ(parse_usage_instant("2026-11-20T04:00:00-05:00"), kNine);
    EXPECT_EQ(parse_usage_instant("2026-11-20"), kNine - 9 * kMsPerHour) << "a date is its 00:00 UTC";
    EXPECT_EQ(parse_usage_instant("2024-02-29"), parse_usage_instant("2024-02-29T00:00:00Z")) << "a leap day";
}

TEST(UsageInstant, AnythingElseIsRefused) {
    for (const char *bad : {"", "2026-11-20T09:00:00", "2026-11-20 09:00:00Z", "2026-11-2", "2026-1-20",
                            "20261120", "2026-13-01", "2026-02-30", "2025-02-29", "2026-11-20x", "-2026-11-20",
                            "2026/11/20", "yesterday", "1795165200000", "2026-11-20T25:00:00Z", "２０２６-11-20"}) {
        EXPECT_FALSE(parse_usage_instant(bad)) << bad;
    }
}

TEST(UsagePeriods, FloorCeilAndLimits) {
    EXPECT_EQ(period_floor(Granularity::kHour, kNine), kNineHour);
    EXPECT_EQ(period_floor(Granularity::kHour, kNine + kMsPerHour - 1), kNineHour);
    EXPECT_EQ(period_ceil(Granularity::kHour, kNine), kNineHour) << "a whole hour stays";
    EXPECT_EQ(period_ceil(Granularity::kHour, kNine + 1), kNineHour + 1) << "a millisecond past: the next";
    EXPECT_EQ(period_floor(Granularity::kDay, kNine), kDay);
    EXPECT_EQ(period_ceil(Granularity::kDay, kNine), kDay + 1);
    EXPECT_EQ(period_ceil(Granularity::kDay, int64_t{kDay} * kMsPerDay), kDay);
    EXPECT_EQ(max_buckets(Granularity::kHour), 168u) << "7 days of hours";
    EXPECT_EQ(max_buckets(Granularity::kDay), 400u);
    EXPECT_EQ(parse_granularity("hour"), Granularity::kHour);
    EXPECT_EQ(parse_granularity("day"), Granularity::kDay);
    for (const char *bad : {"", "Hour", "DAY", "week", "month", "hours", " day"}) EXPECT_FALSE(parse_granularity(bad));
    EXPECT_STREQ(granularity_name(Granularity::kHour), "hour");
    EXPECT_STREQ(granularity_name(Granularity::kDay), "day");
    EXPECT_EQ((UsageRange{Granularity::kDay, 5, 5}).size(), 0u);
    EXPECT_EQ((UsageRange{Granularity::kDay, 6, 5}).size(), 0u);
}

TEST(UsageSeries, ZeroFilledInOrderEdgesAddedUp) {
    FakeSource src;
    const Id acc = id_of(1), key = id_of(2);
    src.rows = {row(1, 2, kNineHour, {5, 1, 0, 5}),
                row(1, 2, kNineHour, {2, 0, 1, 6}),  // the same hour from another edge
                row(1, 3, kNineHour, {1, 0, 0, 1}),  // another key of the account
                row(1, 2, kNineHour + 2, {4, 0, 0, 12}),
                row(1, 2, kNineHour + 9, {100, 0, 0, 100}),  // after the range
                row(7, 8, kNineHour, {50, 0, 0, 50})};       // another account
    UsageRange range{Granularity::kHour, kNineHour - 1, kNineHour + 3};
    auto s = usage_series(src, range, &acc, nullptr, kNine);
    ASSERT_EQ(s.size(), 4u);
    EXPECT_TRUE(same(s[0], {}));
    EXPECT_TRUE(same(s[1], {8, 1, 1, 12}));
    EXPECT_TRUE(same(s[2], {}));
    EXPECT_TRUE(same(s[3], {4, 0, 0, 12}));
    ASSERT_EQ(src.asked.size(), 1u);
    EXPECT_EQ(src.asked[0].from, range.from);
    EXPECT_EQ(src.asked[0].to, range.to);
    EXPECT_TRUE(src.asked[0].account);
    EXPECT_FALSE(src.asked[0].key);

    auto one = usage_series(src, range, &acc, &key, kNine);
    EXPECT_TRUE(same(one[1], {7, 1, 1, 11})) << "the one key, both edges";
    BucketCounts totals;
    for (const auto &c : one) totals.add(c);
    EXPECT_TRUE(same(totals, {11, 1, 1, 23}));
}

TEST(UsageSeries, RowsOutsideTheRangeAreNeverWritten) {
    FakeSource src;
    src.stray = {row(1, 2, 10, {1, 1, 1, 1}), row(1, 2, 99, {1, 1, 1, 1})};
    const Id acc = id_of(1);
    auto s = usage_series(src, UsageRange{Granularity::kDay, 20, 22}, &acc, nullptr, 21 * kMsPerDay);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_TRUE(same(s[0], {}));
    EXPECT_TRUE(same(s[1], {}));
    EXPECT_TRUE(usage_series(src, UsageRange{Granularity::kDay, 22, 22}, &acc, nullptr, 21 * kMsPerDay).empty());
}

TEST(UsageSeries, AnUnreadableSourceThrowsUnavailable) {
    FakeSource src;
    src.unavailable = true;
    const Id acc = id_of(1);
    try {
        usage_series(src, UsageRange{Granularity::kDay, 20, 22}, &acc, nullptr, 21 * kMsPerDay);
        FAIL() << "no throw";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kUnavailable);
    }
}

TEST(UsageSeries, CountsJsonNames) {
    EXPECT_EQ(counts_json({1, 2, 3, 4}),
              json({{"allowed", 1}, {"rateLimited", 2}, {"quotaExceeded", 3}, {"units", 4}}));
    EXPECT_EQ(counts_json({UINT64_MAX, 0, 0, 0})["allowed"].get<uint64_t>(), UINT64_MAX);
}

TEST(UsageReport, DaysAndCalendarMonths) {
    // 2026-10-30 .. 2026-11-02, then 2026-12-31 .. 2027-01-01
    const uint32_t oct30 = period_of(Granularity::kDay, *parse_usage_instant("2026-10-30"));
    auto by_day = billing_periods(oct30, oct30 + 4, false);
    ASSERT_EQ(by_day.labels.size(), 4u);
    EXPECT_EQ(by_day.labels[0], "2026-10-30");
    EXPECT_EQ(by_day.labels[3], "2026-11-02");
    EXPECT_EQ(by_day.of_day, (std::vector<uint32_t>{0, 1, 2, 3}));
    auto by_month = billing_periods(oct30, oct30 + 4, true);
    EXPECT_EQ(by_month.labels, (std::vector<std::string>{"2026-10", "2026-11"}));
    EXPECT_EQ(by_month.of_day, (std::vector<uint32_t>{0, 0, 1, 1}));

    const uint32_t dec31 = period_of(Granularity::kDay, *parse_usage_instant("2026-12-31"));
    EXPECT_EQ(billing_periods(dec31, dec31 + 2, true).labels, (std::vector<std::string>{"2026-12", "2027-01"}))
        << "a month of the range is a period, with use or without";

    // a billing period: November whole is one month of 30 days
    const uint32_t nov1 = period_of(Granularity::kDay, *parse_usage_instant("2026-11-01"));
    auto nov = billing_periods(nov1, nov1 + 30, true);
    EXPECT_EQ(nov.labels, std::vector<std::string>{"2026-11"});
    EXPECT_EQ(nov.of_day, std::vector<uint32_t>(30, 0));
    EXPECT_TRUE(billing_periods(nov1, nov1, true).labels.empty());
}

TEST(UsageReport, CsvFieldsAsRfc4180WritesThem) {
    EXPECT_EQ(csv_field("acme", true), "acme");
    EXPECT_EQ(csv_field("", true), "");
    EXPECT_EQ(csv_field("acme, inc", true), "\"acme, inc\"");
    EXPECT_EQ(csv_field("the \"best\" tools", true), "\"the \"\"best\"\" tools\"");
    EXPECT_EQ(csv_field("\"", true), "\"\"\"\"");
    EXPECT_EQ(csv_field("two\nlines", true), "\"two\nlines\"");
    EXPECT_EQ(csv_field("two\r\nlines", true), "\"two\r\nlines\"");
    EXPECT_EQ(csv_field("Ünïcode ✓", true), "Ünïcode ✓") << "UTF-8 as it is";
    EXPECT_EQ(csv_field("a;b\tc", true), "a;b\tc") << "only comma, quote, CR and LF need quotes";
    // what a spreadsheet would run as a formula is shown as text
    EXPECT_EQ(csv_field("=1+1", true), "'=1+1");
    EXPECT_EQ(csv_field("+cmd", true), "'+cmd");
    EXPECT_EQ(csv_field("-2", true), "'-2");
    EXPECT_EQ(csv_field("@SUM(A1)", true), "'@SUM(A1)");
    EXPECT_EQ(csv_field("\tx", true), "'\tx");
    EXPECT_EQ(csv_field("\rx", true), "\"'\rx\"");
    EXPECT_EQ(csv_field(";x", true), "';x") << "a spreadsheet whose list separator is ; splits there";
    EXPECT_EQ(csv_field("=HYPERLINK(\"http://x\",\"y\")", true), "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\"");
    EXPECT_EQ(csv_field("a=b", true), "a=b") << "only the first character counts";
    // a value that is not text (an id, a number) is as it is
    EXPECT_EQ(csv_field("-2", false), "-2");
    EXPECT_EQ(csv_field("a,b", false), "\"a,b\"");
}

// keyauthd answers a usage source it cannot read as it answers a store it
// cannot read: 503 STORE_UNAVAILABLE, never a 500 or a series of zeros.
TEST(UsageApiUnavailable, Is503StoreUnavailable) {
    keyauth::testing::TempDir dir;
    Store store{std::make_unique<LmdbBackend>(dir.sub("db"))};
    FakeSource src;
    src.unavailable = true;
    ConsoleApi api{store, &src};
    CreatedAccount alice = store.create_account("alice", 100);
    HttpRequest r;
    r.method = "GET";
    r.path = "/v1/usage";
    r.query = "granularity=day&from=2026-11-20&to=2026-11-21";
    r.has_authorization = true;
    r.authorization = "Bearer " + alice.console_token;
    HttpResponse res = api.handle(r);
    EXPECT_EQ(res.status, 503) << res.body;
    EXPECT_EQ(json::parse(res.body)["error"]["code"], "STORE_UNAVAILABLE");
    ASSERT_EQ(src.asked.size(), 1u);
    EXPECT_EQ(src.asked[0].from, kDay);
    EXPECT_EQ(src.asked[0].to, kDay + 2);
}

}  // namespace

namespace {

UsageRangeAnswer range_of(std::optional<std::string> g, std::optional<std::string> from,
                          std::optional<std::string> to, int64_t now = kNine + 1234) {
    return parse_usage_range(g, from, to, now);
}

TEST(UsageRange, FromRoundsDownToRoundsUp) {
    auto r = range_of("hour", "2026-11-20T09:30:00Z", "2026-11-20T10:15:00.001Z");
    ASSERT_EQ(r.field, "") << r.message;
    EXPECT_EQ(r.range.granularity, Granularity::kHour);
    EXPECT_EQ(r.range.from, kNineHour);
    EXPECT_EQ(r.range.to, kNineHour + 2);
    r = range_of("hour", "2026-11-20T09:00:00Z", "2026-11-20T10:00:00Z");
    EXPECT_EQ(r.range.size(), 1u) << "whole hours stay as they are";
    r = range_of(std::nullopt, "2026-11-20", "2026-11-21");
    EXPECT_EQ(r.range.granularity, Granularity::kDay) << "day by default";
    EXPECT_EQ(r.range.from, kDay);
    EXPECT_EQ(r.range.to, kDay + 2) << "a date as to includes that whole day: two days";
    r = range_of(std::nullopt, "2026-11-20", "2026-11-21T00:00:00Z");
    EXPECT_EQ(r.range.to, kDay + 1) << "an instant as to is exclusive: one day";
    r = range_of("day", "2026-11-20", "2026-11-20");
    ASSERT_EQ(r.field, "") << r.message;
    EXPECT_EQ(r.range.size(), 1u) << "from=to=a date: that day";
    r = range_of("hour", "2026-11-20", "2026-11-20");
    ASSERT_EQ(r.field, "") << r.message;
    EXPECT_EQ(r.range.from, kDay * 24);
    EXPECT_EQ(r.range.size(), 24u) << "... in hours: its 24 hours";
    // offsets name instants: 2026-11-21T00:59:59.999Z rounds down to the
    // 21st, 2026-11-20T23:00:00Z up to the 21st: an empty range
    EXPECT_EQ(range_of("day", "2026-11-20T23:59:59.999-01:00", "2026-11-21T00:00:00+01:00").field, "from");
    r = range_of("day", "2026-11-20T23:59:59.999-01:00", "2026-11-22T00:00:00+01:00");
    EXPECT_EQ(r.range.from, kDay + 1);
    EXPECT_EQ(r.range.to, kDay + 2);
}

TEST(UsageRange, Defaults) {
    auto d = range_of(std::nullopt, std::nullopt, std::nullopt);
    EXPECT_EQ(d.range.to, kDay + 1) << "to the end of today";
    EXPECT_EQ(d.range.size(), 30u);
    auto h = range_of("hour", std::nullopt, std::nullopt);
    EXPECT_EQ(h.range.to, kNineHour + 1) << "to the end of the current hour";
    EXPECT_EQ(h.range.size(), 48u);
    auto from_only = range_of("day", "2026-11-01", std::nullopt);
    EXPECT_EQ(from_only.range.to, kDay + 1);
    EXPECT_EQ(from_only.range.size(), 20u);
    auto to_only = range_of("day", std::nullopt, "2026-11-01");
    EXPECT_EQ(to_only.range.size(), 30u) << "30 days ending with to";
    EXPECT_EQ(period_start_ms(Granularity::kDay, to_only.range.to), *parse_usage_instant("2026-11-02"))
        << "November's first day included";
}

TEST(UsageRange, LimitsAndRefusalsNameTheField) {
    EXPECT_EQ(range_of("hour", "2026-11-20T00:00:00Z", "2026-11-27T00:00:00Z").range.size(), 168u);
    EXPECT_EQ(range_of("day", "2025-01-01", "2026-02-04").range.size(), 400u);
    EXPECT_EQ(range_of("day", "2025-01-01", "2026-02-05T00:00:00Z").range.size(), 400u);
    struct Case {
        std::optional<std::string> g, from, to;
        const char *field;
    } cases[] = {
        {"week", std::nullopt, std::nullopt, "granularity"},
        {"", std::nullopt, std::nullopt, "granularity"},
        {"hour", "2026-11-20T00:00:00Z", "2026-11-27T00:00:00.001Z", "to"},  // 169 hours
        {"day", "2025-01-01", "2026-02-05", "to"},                           // 401 days
        {"day", "2020-01-01", std::nullopt, "from"},                         // to not given: from names it
        {"day", "2026-11-21", "2026-11-20", "from"},
        {"day", "2026-11-20", "2026-11-20T00:00:00Z", "from"},               // an empty range
        {std::nullopt, std::nullopt, "1970-01-01", "to"},                    // 30 days would start in 1969
        {"hour", std::nullopt, "1970-01-01T00:00:00Z", "to"},                // nothing before it
        {"day", "2026-12-01", std::nullopt, "from"},                         // after today
        {"day", "yesterday", "nonsense", "from"},                            // from first
        {"day", "2026-11-20", "nonsense", "to"},
        {"day", "1969-12-31", "1970-01-02", "from"},                         // before the epoch
        {"day", "9999-12-30", "9999-12-30", ""},                             // the last day that can end a range
        {"day", "9999-12-30", "9999-12-31", "to"},                           // would end in the year 10000
        {"day", "9999-12-30", "9999-12-31T00:00:00.001Z", "to"},             // would end in the year 10000
        {"hour", "9999-12-31T22:00:00Z", "9999-12-31T23:30:00Z", "to"},
    };
    for (const auto &c : cases) {
        auto r = range_of(c.g, c.from, c.to);
        EXPECT_EQ(r.field, c.field) << c.g.value_or("-") << " " << c.from.value_or("-") << " " << c.to.value_or("-")
                                    << ": " << r.message;
        if (*c.field) {
            EXPECT_FALSE(r.message.empty());
            EXPECT_EQ(r.range.size(), 0u);
        }
    }
}

}  // namespace
