// Usage over time on one edge: the zone's slots count every outcome and the
// units charged, a collection adds them to the key's hour and day buckets in
// the usage env, old buckets age out from the start of their time-ordered
// tables, and keyauthd's LMDB source reads them back by account, key or all.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "keyauth_core.h"
#include "temp_dir.h"
#include "usage_delta.h"
#include "usage_bucket.h"
#include "usage_env.h"
#include "usage_source.h"
#include "usage_table.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

// 2026-11-27T09:00:00Z
constexpr int64_t kNine = 1795770000000;

Id id_of(unsigned char c) {
    Id id;
    id.fill(c);
    return id;
}

// No last call recorded: filed at the time UsageEnv::add is given (a delta
// with one is filed at it: CollectionsFileEachDeltaAtItsLastCall).
UsageDelta delta(const Id &account, const Id &key, BucketCounts c) {
    return keyauth::testing::usage_delta(account, key, c, 0);
}

using Found = std::map<std::tuple<Id, Id, uint32_t>, BucketCounts>;

Found read(UsageSource &src, Granularity g, uint32_t from, uint32_t to, const Id *account = nullptr,
           const Id *key = nullptr) {
    Found out;
    src.buckets(g, from, to, account, key,
                [&out](const BucketRow &r) { out[{r.account, r.key, r.period}].add(r.counts); });
    return out;
}

TEST(UsageBucket, KeyAndRecordRoundTrip) {
    const Id a = id_of(1), k = id_of(2);
    unsigned char key[KA_USAGE_BUCKET_KEY_LEN];
    encode_bucket_key(0x01020304, a.data(), k.data(), key);
    EXPECT_EQ(key[0], 1);  // big-endian: the table is in time order
    uint32_t period = 0;
    Id a2{}, k2{};
    ASSERT_TRUE(decode_bucket_key({reinterpret_cast<char *>(key), sizeof(key)}, period, a2.data(), k2.data()));
    EXPECT_EQ(period, 0x01020304u);
    EXPECT_EQ(a2, a);
    EXPECT_EQ(k2, k);
    unsigned char rec[KA_USAGE_BUCKET_SIZE];
    const BucketCounts c{1, 2, 3, 40};
    encode_bucket(c, rec);
    BucketCounts back;
    ASSERT_TRUE(decode_bucket({reinterpret_cast<char *>(rec), sizeof(rec)}, back));
    EXPECT_EQ(back, c);
    rec[0] = 2;  // a later layout is never guessed at
    EXPECT_FALSE(decode_bucket({reinterpret_cast<char *>(rec), sizeof(rec)}, back));
    EXPECT_FALSE(decode_bucket({reinterpret_cast<char *>(rec), sizeof(rec) - 1}, back));
    EXPECT_EQ(period_of(Granularity::kHour, kNine), kNine / kMsPerHour);
    EXPECT_EQ(period_start_ms(Granularity::kDay, period_of(Granularity::kDay, kNine + 5)),
              kNine - 9 * kMsPerHour);
}

// Every outcome and the units land in the slot and come out of it once.
TEST(UsageBucket, TheTableCountsOutcomesAndUnits) {
    std::vector<unsigned char> mem(UsageTable::kHeaderBytes + 64 * UsageTable::kSlotBytes);
    ASSERT_TRUE(UsageTable::format(mem.data(), mem.size()));
    UsageTable *t = UsageTable::attach(mem.data(), mem.size());
    std::mutex mu;
    RateLock lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                  [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
    const Id a = id_of(1), k = id_of(2);
    t->count(a.data(), k.data(), UsageOutcome::kAllowed, 3, kNine, 1, lock);
    t->count(a.data(), k.data(), UsageOutcome::kAllowed, 0, kNine + 1, 1, lock);  // metered: units later
    t->count(a.data(), k.data(), UsageOutcome::kUnitsOnly, 17, kNine + 900, 1, lock);
    t->count(a.data(), k.data(), UsageOutcome::kRateLimited, 0, kNine + 2, 1, lock);
    t->count(a.data(), k.data(), UsageOutcome::kQuotaExceeded, 0, kNine + 3, 1, lock);
    t->count(a.data(), k.data(), UsageOutcome::kQuotaExceeded, 0, kNine + 4, 1, lock);
    std::vector<UsageDelta> got;
    t->collect(0, t->slots(), kNine + 5, 300000, lock, [&got](const UsageDelta &d) { got.push_back(d); });
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].allowed, 2u);
    EXPECT_EQ(got[0].rate_limited, 1u);
    EXPECT_EQ(got[0].quota_exceeded, 2u);
    EXPECT_EQ(got[0].units, 20u);
    EXPECT_EQ(got[0].last_used_ms, kNine + 4) << "units alone are not a use";
    got.clear();
    t->collect(0, t->slots(), kNine + 6, 300000, lock, [&got](const UsageDelta &d) { got.push_back(d); });
    EXPECT_TRUE(got.empty()) << "each count is collected once";
    // given back (a collection that could not be stored): all four come back
    t->restore(delta(a, k, {1, 2, 3, 4}), lock);
    t->collect(0, t->slots(), kNine + 7, 300000, lock, [&got](const UsageDelta &d) { got.push_back(d); });
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].quota_exceeded, 3u);
    EXPECT_EQ(got[0].units, 4u);
}

TEST(UsageBucket, CollectionsAddUpInHoursAndDays) {
    TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    auto env = UsageEnv::open(path, err);
    ASSERT_TRUE(env) << err;
    const Id a = id_of(1), b = id_of(9), k1 = id_of(2), k2 = id_of(3), kb = id_of(4);
    std::vector<UsageDelta> d{delta(a, k1, {5, 1, 0, 5}), delta(a, k2, {1, 0, 2, 1}), delta(b, kb, {7, 0, 0, 70})};
    ASSERT_TRUE(env->add(d.data(), d.size(), kNine + 10, err)) << err;
    d = {delta(a, k1, {2, 0, 1, 2})};
    ASSERT_TRUE(env->add(d.data(), d.size(), kNine + 3599999, err)) << err;  // 09:59:59.999
    d = {delta(a, k1, {4, 0, 0, 4})};
    ASSERT_TRUE(env->add(d.data(), d.size(), kNine + kMsPerHour, err)) << err;  // 10:00
    // a delta with nothing in it writes no bucket
    d = {delta(a, k2, {})};
    ASSERT_TRUE(env->add(d.data(), d.size(), kNine + 2 * kMsPerHour, err)) << err;

    auto src = make_lmdb_usage_source(path);
    const uint32_t h9 = period_of(Granularity::kHour, kNine), day = period_of(Granularity::kDay, kNine);
    Found hours = read(*src, Granularity::kHour, h9 - 24, h9 + 24, &a);
    EXPECT_EQ(hours.size(), 3u);
    EXPECT_EQ((hours[{a, k1, h9}]), (BucketCounts{7, 1, 1, 7}));
    EXPECT_EQ((hours[{a, k2, h9}]), (BucketCounts{1, 0, 2, 1}));
    EXPECT_EQ((hours[{a, k1, h9 + 1}]), (BucketCounts{4, 0, 0, 4}));
    Found one = read(*src, Granularity::kHour, h9, h9 + 1, &a, &k1);
    ASSERT_EQ(one.size(), 1u) << "one key, one hour: [from, to)";
    EXPECT_EQ((one[{a, k1, h9}]), (BucketCounts{7, 1, 1, 7}));
    Found days = read(*src, Granularity::kDay, day, day + 1, &a);
    EXPECT_EQ(days.size(), 2u);
    EXPECT_EQ((days[{a, k1, day}]), (BucketCounts{11, 1, 1, 11}));
    Found other = read(*src, Granularity::kDay, day - 400, day + 400, &b);
    ASSERT_EQ(other.size(), 1u) << "another account's keys are never read";
    EXPECT_EQ((other[{b, kb, day}]), (BucketCounts{7, 0, 0, 70}));
    EXPECT_EQ(read(*src, Granularity::kDay, day, day + 1).size(), 3u) << "every account";
    EXPECT_TRUE(read(*src, Granularity::kDay, day + 1, day + 2, &a).empty());
    EXPECT_TRUE(read(*src, Granularity::kDay, day, day).empty()) << "an empty range";
}

// A delta is filed at its last call, whenever it is collected: a walk that
// takes a key's counts after the hour files them in the hour they were
// made (the zone keeps a key's hours apart; #44 item 13).
TEST(UsageBucket, CollectionsFileEachDeltaAtItsLastCall) {
    TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    auto env = UsageEnv::open(path, err);
    ASSERT_TRUE(env) << err;
    const Id a = id_of(1), k = id_of(2);
    const std::vector<UsageDelta> d{keyauth::testing::usage_delta(a, k, {3, 0, 0, 3}, kNine - 1),
                                    keyauth::testing::usage_delta(a, k, {2, 0, 0, 2}, kNine + 1500)};
    ASSERT_TRUE(env->add(d.data(), d.size(), kNine + 2000, err)) << err;  // collected at 09:00:02
    auto src = make_lmdb_usage_source(path);
    const uint32_t h9 = period_of(Granularity::kHour, kNine);
    Found hours = read(*src, Granularity::kHour, h9 - 1, h9 + 1, &a);
    EXPECT_EQ((hours[{a, k, h9 - 1}]), (BucketCounts{3, 0, 0, 3})) << "08:59:59.999: the hour before";
    EXPECT_EQ((hours[{a, k, h9}]), (BucketCounts{2, 0, 0, 2}));
    EXPECT_EQ(src->usage_of(a, {k})[k].last_used_ms, kNine + 1500);
}

// Hours are kept 7 days and days `days_kept`: a collection removes what is
// older from the start of each table, a bounded number at a time.
TEST(UsageBucket, OldBucketsAgeOut) {
    TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    auto env = UsageEnv::open(path, err, 30);
    ASSERT_TRUE(env) << err;
    const Id a = id_of(1), k = id_of(2);
    std::vector<UsageDelta> d{delta(a, k, {1, 0, 0, 1})};
    for (int64_t day = 0; day < 40; day++) {
        ASSERT_TRUE(env->add(d.data(), 1, kNine + day * kMsPerDay, err)) << err;
    }
    auto src = make_lmdb_usage_source(path);
    const uint32_t first_day = period_of(Granularity::kDay, kNine), last_day = first_day + 39;
    Found days = read(*src, Granularity::kDay, 0, last_day + 1, &a);
    ASSERT_EQ(days.size(), 30u);
    EXPECT_EQ(std::get<2>(days.begin()->first), last_day - 29);
    const uint32_t last_hour = period_of(Granularity::kHour, kNine + 39 * kMsPerDay);
    Found hours = read(*src, Granularity::kHour, 0, last_hour + 1, &a);
    ASSERT_EQ(hours.size(), 7u) << "one a day, for the last 7 days (168 hours)";
    EXPECT_GT(std::get<2>(hours.begin()->first), last_hour - kHourBucketsKept);
}

// An idle edge (nothing counted since) still ages out what is past its
// keeping: a collection's last part does it, traffic or not (#44 item 12:
// hours 9 days old and days 404 days old read back until the next request).
TEST(UsageBucket, AnIdleCollectionAgesOutOldBuckets) {
    TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    const Id a = id_of(1), k = id_of(2);
    {
        auto env = UsageEnv::open(path, err, 400);
        ASSERT_TRUE(env) << err;
        std::vector<UsageDelta> d{delta(a, k, {1, 0, 0, 1})};
        ASSERT_TRUE(env->add(d.data(), 1, kNine, err)) << err;
    }
    std::vector<unsigned char> mem(UsageTable::kHeaderBytes + 64 * UsageTable::kSlotBytes);
    ASSERT_TRUE(ka_usage_table_format(mem.data(), mem.size()));
    std::mutex mu;
    ka_lock_t lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                   [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
    char why[256] = "";
    ka_usage_env_t *env = ka_usage_env_open(path.c_str(), 400, why, sizeof(why));
    ASSERT_NE(env, nullptr) << why;
    auto collect_at = [&](int64_t now) {
        for (size_t from = 0; from < ka_usage_table_slots(mem.data());)
            ASSERT_EQ(ka_usage_flush_part(mem.data(), env, &from, now, 300000, &lock, why, sizeof(why)), 0)
                << why;
    };
    auto src = make_lmdb_usage_source(path);
    const uint32_t h9 = period_of(Granularity::kHour, kNine), day = period_of(Granularity::kDay, kNine);
    collect_at(kNine + 7 * kMsPerDay - 1);  // the hour is still kept: its 168th
    EXPECT_EQ(read(*src, Granularity::kHour, h9, h9 + 1).size(), 1u);
    collect_at(kNine + 9 * kMsPerDay);
    EXPECT_TRUE(read(*src, Granularity::kHour, h9, h9 + 1).empty()) << "an hour 9 days old, aged out while idle";
    EXPECT_EQ(read(*src, Granularity::kDay, day, day + 1).size(), 1u);
    collect_at(kNine + 404 * kMsPerDay);
    EXPECT_TRUE(read(*src, Granularity::kDay, day, day + 1).empty()) << "a day 404 days old, aged out while idle";
    ka_usage_env_close(env);
}

// A collection that finds the map full doubles it and writes again: nothing
// is refused, nothing is lost (the env starts at 1 GiB; buckets add up).
TEST(UsageBucket, AFullMapGrows) {
    TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    auto env = UsageEnv::open(path, err, 400, 64 * 1024);
    ASSERT_TRUE(env) << err;
    const Id a = id_of(1);
    std::vector<UsageDelta> d;
    for (int batch = 0; batch < 40; batch++) {
        d.clear();
        for (int i = 0; i < 100; i++) {
            Id k{};
            k[0] = static_cast<unsigned char>(batch);
            k[1] = static_cast<unsigned char>(i);
            d.push_back(delta(a, k, {1, 0, 0, 2}));
        }
        ASSERT_TRUE(env->add(d.data(), d.size(), kNine, err)) << "batch " << batch << ": " << err;
    }
    auto src = make_lmdb_usage_source(path);
    const uint32_t day = period_of(Granularity::kDay, kNine);
    Found days = read(*src, Granularity::kDay, day, day + 1, &a);
    ASSERT_EQ(days.size(), 4000u);
    for (const auto &[where, counts] : days) EXPECT_EQ(counts, (BucketCounts{1, 0, 0, 2}));
}

// A usage env that has never been written (or none at all) reads as no
// buckets, never as an error.
TEST(UsageBucket, NoEnvReadsAsNothing) {
    TempDir dir;
    auto src = make_lmdb_usage_source(dir.sub("missing.usage"));
    const Id a = id_of(1);
    EXPECT_TRUE(read(*src, Granularity::kDay, 0, 1u << 20, &a).empty());
}

}  // namespace
