// keyauthctl usage report's rows and the admin API's stream, against a real
// store and a real usage env: with more accounts than its count budget
// holds, the report reads the usage again for each group of accounts that
// fits, and gives the very rows one read gives; with one account it reads
// once.
#include <gtest/gtest.h>

#include "usage_report.h"
#include "usage_store_fixture.h"

using namespace keyauth;

namespace {

class UsageReportRowsTest : public keyauth::testing::UsageStoreFixture {
protected:
    std::vector<KeyRecord> keys;

    // 300 accounts, a key each, used on one to three of four days (every
    // fifth never)
    UsageReportRowsTest() {
        for (int i = 0; i < 300; i++) {
            CreatedAccount a = store.create_account("acct " + std::to_string(i), 100);
            keys.push_back(make_key(a.account.id));
            if (i % 5 == 4) continue;
            for (int d = 0; d <= i % 3; d++) {
                const uint64_t n = uint64_t(i + d + 1);
                count(keys.back(), {n, 0, 0, n}, kNine - d * kMsPerDay);
            }
        }
    }

    UsageReportQuery days() const {
        UsageReportQuery q;
        q.from_day = period_of(Granularity::kDay, kNine) - 3;
        q.to_day = q.from_day + 4;
        return q;
    }
    static std::vector<std::string> csv(UsageReportRows &rows) {
        std::vector<std::string> lines;
        std::vector<UsageReportRow> some;
        while (rows.next(some, 7)) {
            for (const auto &r : some) lines.push_back(usage_report_csv_row(r));
        }
        return lines;
    }
};

TEST_F(UsageReportRowsTest, MoreAccountsThanTheBudgetHoldsGiveTheRowsOfOneRead) {
    UsageReportRows whole(store, usage.get(), days());
    const std::vector<std::string> want = csv(whole);
    EXPECT_EQ(whole.reads(), 1u);
    EXPECT_EQ(want.size(), 240u * 4) << "240 accounts with use, 4 days each";

    // 4 periods a row, 40 counts: 10 accounts a read
    UsageReportRows parts(store, usage.get(), days(), 40);
    EXPECT_EQ(csv(parts), want);
    EXPECT_EQ(parts.reads(), 1u + 24) << "a read to list them, then one per 10 accounts";

    UsageReportQuery by_month = days();
    by_month.by_month = true;
    UsageReportRows months_whole(store, usage.get(), by_month);
    UsageReportRows months_parts(store, usage.get(), by_month, 7);
    EXPECT_EQ(csv(months_parts), csv(months_whole));
}

TEST_F(UsageReportRowsTest, OneAccountOrKeyIsOneRead) {
    UsageReportQuery q = days();
    q.key = keys[7].key_id;
    UsageReportRows one(store, usage.get(), q, 1);
    const std::vector<std::string> lines = csv(one);
    EXPECT_EQ(one.reads(), 1u);
    ASSERT_EQ(lines.size(), 4u);
    // the 8th account: 8 calls on the last day, 9 the day before
    EXPECT_NE(lines[3].find(",8,0,0,8\r\n"), std::string::npos) << lines[3];
    EXPECT_NE(lines[2].find(",9,0,0,9\r\n"), std::string::npos) << lines[2];
}

}  // namespace
