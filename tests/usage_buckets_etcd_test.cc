// Usage over time on many edges (issue 29): each edge's keyauth-syncd
// publishes its hour and day buckets to etcd (usage_publisher.h), keyauthd's
// etcd source reads them back by account, key or all, one record per edge
// (usage_etcd_source.cc), old buckets age out with one DeleteRange, and a
// failed round or a restart loses nothing. Real etcd members on loopback
// (tests/etcd_cluster.h), real usage envs written as the collector does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "console_api.h"
#include "etcd_client.h"
#include "etcd_cluster.h"
#include "etcd_keyspace.h"
#include "lmdb_backend.h"
#include "mutation.h"
#include "record_changes.h"
#include "rfc3339.h"
#include "store_error.h"
#include "syncd_metrics.h"
#include "temp_dir.h"
#include "usage_delta.h"
#include "usage_env.h"
#include "usage_keyspace.h"
#include "usage_publisher.h"
#include "usage_source.h"

using namespace keyauth;
using keyauth::testing::EtcdCluster;
using keyauth::testing::TempDir;

namespace {

const std::string kPrefix = "/keyauth/1";
// 2026-11-27T09:00:00Z
constexpr int64_t kNine = 1795770000000;
const uint32_t kH9 = period_of(Granularity::kHour, kNine);
const uint32_t kDay = period_of(Granularity::kDay, kNine);

Id id_of(unsigned char c) {
    Id id;
    id.fill(c);
    return id;
}

// One collection of `counts` for a key at `at_ms`, as the worker does.
void collect(const std::string &path, const Id &account, const Id &key, BucketCounts counts, int64_t at_ms) {
    std::string err;
    auto env = UsageEnv::open(path, err);
    ASSERT_TRUE(env) << err;
    const UsageDelta d = keyauth::testing::usage_delta(account, key, counts, at_ms);
    ASSERT_TRUE(env->add(&d, 1, at_ms, err)) << err;
}

struct Clock {
    std::atomic<int64_t> ms{kNine + 10 * 60 * 1000};  // 09:10
};

syncd::UsagePublisherOptions options(const EtcdCluster &etcd, const std::string &usage_db, Clock &clock,
                                     uint32_t history_days = kDefaultDayBucketsKept) {
    syncd::UsagePublisherOptions o;
    o.etcd.endpoints = etcd.endpoint_list();
    o.etcd.request_timeout = std::chrono::milliseconds(2000);
    o.prefix = kPrefix;
    o.usage_db = usage_db;
    o.history_days = history_days;
    o.now_ms = [&clock] { return clock.ms.load(); };
    return o;
}

etcd::ClientOptions client_options(const EtcdCluster &etcd) {
    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    co.request_timeout = std::chrono::milliseconds(2000);
    return co;
}

using Key3 = std::tuple<Id, Id, uint32_t>;
struct Read {
    std::map<Key3, BucketCounts> sum;
    std::map<Key3, int> records;  // how many edge records made each sum
};

Read read(UsageSource &src, Granularity g, uint32_t from, uint32_t to, const Id *account = nullptr,
          const Id *key = nullptr) {
    Read out;
    src.buckets(g, from, to, account, key, [&out](const BucketRow &r) {
        out.sum[{r.account, r.key, r.period}].add(r.counts);
        out.records[{r.account, r.key, r.period}]++;
    });
    return out;
}

}  // namespace

TEST(UsageBucketKeyspace, TimeFirstKeysRoundTrip) {
    const unsigned char edge[KA_USAGE_EDGE_ID_LEN] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff};
    const std::string k = etcd_usage_bucket_key(kPrefix, Granularity::kHour, kH9, id_of(1), id_of(0xc3), edge);
    EXPECT_EQ(k, "/keyauth/1/usage_hours/2026112709/010101010101010101010101c3c3c3c3c3c3c3c3c3c3c3c3/"
                 "ab0102030405060708090aff");
    EXPECT_EQ(etcd_usage_bucket_key(kPrefix, Granularity::kDay, kDay, id_of(1), id_of(2), edge),
              "/keyauth/1/usage_days/20261127/010101010101010101010101020202020202020202020202/"
              "ab0102030405060708090aff");
    for (Granularity g : {Granularity::kHour, Granularity::kDay}) {
        const uint32_t p = g == Granularity::kHour ? kH9 : kDay;
        UsageBucketName n;
        const std::string table = etcd_usage_bucket_prefix(kPrefix, g);
        ASSERT_TRUE(parse_etcd_usage_bucket_key(table, g, etcd_usage_bucket_key(kPrefix, g, p, id_of(1), id_of(2), edge), n));
        EXPECT_EQ(n.period, p);
        EXPECT_EQ(n.account, id_of(1));
        EXPECT_EQ(n.key, id_of(2));
        EXPECT_EQ(std::memcmp(n.edge_id, edge, sizeof(edge)), 0);
        EXPECT_EQ(etcd_usage_period_text(g, 0), g == Granularity::kHour ? "1970010100" : "19700101");
    }
    UsageBucketName n;
    const std::string hours = etcd_usage_bucket_prefix(kPrefix, Granularity::kHour);
    const std::string tail = "/010101010101010101010101020202020202020202020202/ab0102030405060708090aff";
    EXPECT_TRUE(parse_etcd_usage_bucket_key(hours, Granularity::kHour, hours + "2024022923" + tail, n));
    EXPECT_FALSE(parse_etcd_usage_bucket_key(hours, Granularity::kHour, hours + "2026022923" + tail, n))
        << "29 February 2026 is no day";
    EXPECT_FALSE(parse_etcd_usage_bucket_key(hours, Granularity::kHour, hours + "2026112724" + tail, n));
    EXPECT_FALSE(parse_etcd_usage_bucket_key(hours, Granularity::kHour, hours + "20261127" + tail, n));
    EXPECT_FALSE(parse_etcd_usage_bucket_key(hours, Granularity::kDay, hours + "2026112709" + tail, n));
    std::string upper = hours + "2026112709" + tail;
    upper[upper.size() - 1] = 'F';
    EXPECT_FALSE(parse_etcd_usage_bucket_key(hours, Granularity::kHour, upper, n));
    // fixed-width UTC digits: byte order is time order, across years too
    EXPECT_LT(etcd_usage_period_prefix(kPrefix, Granularity::kHour, kH9 + 14 + 24 * 34),  // 2026-12-31T23
              etcd_usage_period_prefix(kPrefix, Granularity::kHour, kH9 + 15 + 24 * 34));  // 2027-01-01T00
    EXPECT_EQ(etcd_usage_period_text(Granularity::kHour, kH9 + 15 + 24 * 34), "2027010100");
    const uint32_t last = etcd_usage_last_period(Granularity::kDay);
    EXPECT_EQ(etcd_usage_period_text(Granularity::kDay, last), "99991231");
    EXPECT_EQ(etcd_usage_period_text(Granularity::kDay, last + 1), "");
    EXPECT_EQ(etcd_usage_period_prefix(kPrefix, Granularity::kDay, last + 1),
              etcd::prefix_range_end(etcd_usage_bucket_prefix(kPrefix, Granularity::kDay)));
    uint32_t h = 0, d = 0;
    ASSERT_TRUE(decode_usage_mark(encode_usage_mark(kH9, kDay), h, d));
    EXPECT_EQ(h, kH9);
    EXPECT_EQ(d, kDay);
    EXPECT_FALSE(decode_usage_mark("12", h, d));
    EXPECT_FALSE(decode_usage_mark("1 99999999999", h, d));
}

// Buckets and marks sort outside syncd's watch and rebuild ranges, and
// outside the totals' "<prefix>/usage/" ranges.
TEST(UsageBucketKeyspace, OutsideTheWatchAndTheTotals) {
    const unsigned char edge[KA_USAGE_EDGE_ID_LEN] = {};
    const std::string watch_from = syncd::watched_prefix(kPrefix), watch_end = syncd::watched_end(kPrefix);
    const std::string totals = etcd_usage_prefix(kPrefix), totals_end = etcd::prefix_range_end(totals);
    std::vector<std::string> ours = {
        etcd_usage_bucket_prefix(kPrefix, Granularity::kHour),
        etcd_usage_bucket_prefix(kPrefix, Granularity::kDay),
        etcd_usage_bucket_key(kPrefix, Granularity::kHour, 0, id_of(0), id_of(0), edge),
        etcd_usage_bucket_key(kPrefix, Granularity::kDay, etcd_usage_last_period(Granularity::kDay), id_of(0xff),
                              id_of(0xff), edge),
        etcd_usage_mark_key(kPrefix, edge),
        etcd_usage_history_key(kPrefix)};
    for (const std::string &k : ours) {
        EXPECT_FALSE(k >= watch_from && k < watch_end) << k << " is watched";
        EXPECT_FALSE(k >= totals && k < totals_end) << k << " is read as totals";
        for (const etcd::RangeRequest &r : syncd::snapshot_ranges(kPrefix)) {
            EXPECT_FALSE(k >= r.key && k < r.range_end) << k << " is read by a rebuild";
        }
    }
    // the marks and the history are outside every bucket range (an age-out
    // never takes them)
    for (const std::string &k : {etcd_usage_mark_key(kPrefix, edge), etcd_usage_history_key(kPrefix)}) {
        for (Granularity g : {Granularity::kHour, Granularity::kDay}) {
            const std::string table = etcd_usage_bucket_prefix(kPrefix, g);
            EXPECT_FALSE(k >= table && k < etcd::prefix_range_end(table)) << k;
        }
    }
    uint32_t days = 0;
    EXPECT_TRUE(decode_usage_history(encode_usage_history(3660), days));
    EXPECT_EQ(days, 3660u);
    for (const char *bad : {"", "0", "-1", "4294967296", "12a", " 400"}) EXPECT_FALSE(decode_usage_history(bad, days)) << bad;
}

// Two edges publish; the etcd source gives one record per edge, and they add
// up to what was collected: by account, by key, for every account.
TEST(UsageBucketsEtcd, TwoEdgesAddUpByAccountKeyAndAll) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge-a.usage"), b = dir.sub("edge-b.usage");
    const Id acc = id_of(1), k1 = id_of(2), k2 = id_of(3), other = id_of(8), ko = id_of(9);
    collect(a, acc, k1, {5, 1, 0, 5}, kNine + 60000);
    collect(a, acc, k1, {2, 0, 1, 4}, kNine + kMsPerHour + 60000);  // 10:01
    collect(a, acc, k2, {1, 0, 0, 1}, kNine + 60000);
    collect(b, acc, k1, {10, 3, 2, 30}, kNine + 120000);
    collect(b, other, ko, {7, 0, 0, 7}, kNine + 120000);
    Clock clock;
    clock.ms = kNine + kMsPerHour + 120000;  // 10:02
    syncd::Metrics ma, mb;
    std::string error;
    auto pa = syncd::UsagePublisher::make(options(etcd, a, clock), ma, error);
    auto pb = syncd::UsagePublisher::make(options(etcd, b, clock), mb, error);
    ASSERT_TRUE(pa && pb) << error;
    ASSERT_TRUE(pa->publish_once());
    ASSERT_TRUE(pb->publish_once());
    EXPECT_EQ(ma.usage_buckets_published(), 5u) << "hours 09 and 10 of k1, 09 of k2; the day of each";
    EXPECT_EQ(mb.usage_buckets_published(), 4u);
    EXPECT_EQ(ma.usage_published(), 2u) << "the totals as before";

    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    Read hours = read(*src, Granularity::kHour, kH9 - 24, kH9 + 24, &acc);
    EXPECT_EQ(hours.sum.size(), 3u);
    EXPECT_EQ((hours.sum[{acc, k1, kH9}]), (BucketCounts{15, 4, 2, 35}));
    EXPECT_EQ((hours.records[{acc, k1, kH9}]), 2) << "one record per edge";
    EXPECT_EQ((hours.sum[{acc, k1, kH9 + 1}]), (BucketCounts{2, 0, 1, 4}));
    EXPECT_EQ((hours.sum[{acc, k2, kH9}]), (BucketCounts{1, 0, 0, 1}));
    // one key
    Read one = read(*src, Granularity::kHour, kH9, kH9 + 2, &acc, &k2);
    ASSERT_EQ(one.sum.size(), 1u);
    EXPECT_EQ((one.sum[{acc, k2, kH9}]), (BucketCounts{1, 0, 0, 1}));
    // [from, to): the 10:00 bucket is outside [09, 10)
    EXPECT_EQ(read(*src, Granularity::kHour, kH9, kH9 + 1, &acc, &k1).sum.size(), 1u);
    EXPECT_TRUE(read(*src, Granularity::kHour, kH9 + 2, kH9 + 24, &acc).sum.empty());
    // days, every account
    Read days = read(*src, Granularity::kDay, kDay - 30, kDay + 1);
    EXPECT_EQ(days.sum.size(), 3u);
    EXPECT_EQ((days.sum[{acc, k1, kDay}]), (BucketCounts{17, 4, 3, 39}));
    EXPECT_EQ((days.records[{acc, k1, kDay}]), 2);
    EXPECT_EQ((days.sum[{other, ko, kDay}]), (BucketCounts{7, 0, 0, 7}));
    // another account's are never given for an account
    EXPECT_TRUE(read(*src, Granularity::kDay, kDay, kDay + 1, &other, &k1).sum.empty());
    EXPECT_EQ(read(*src, Granularity::kDay, kDay, kDay + 1, &other).sum.size(), 1u);
    // the totals still read as before
    EXPECT_EQ(src->usage_of(acc, {k1})[k1].allowed, 17u);

    // nothing changed: nothing is put
    ASSERT_TRUE(pa->publish_once());
    ASSERT_TRUE(pb->publish_once());
    EXPECT_EQ(ma.usage_buckets_published(), 5u);
    EXPECT_EQ(mb.usage_buckets_published(), 4u);
    // a change: its hour and its day are put again, and read back
    collect(b, acc, k1, {1, 0, 0, 1}, kNine + 150000);  // late counts of 09:xx
    ASSERT_TRUE(pb->publish_once());
    EXPECT_EQ(mb.usage_buckets_published(), 6u);
    EXPECT_EQ((read(*src, Granularity::kHour, kH9, kH9 + 1, &acc).sum[{acc, k1, kH9}]),
              (BucketCounts{16, 4, 2, 36}));
    EXPECT_EQ((read(*src, Granularity::kDay, kDay, kDay + 1, &acc, &k1).sum[{acc, k1, kDay}]),
              (BucketCounts{18, 4, 3, 40}));
    EXPECT_EQ(ma.usage_publish_errors() + mb.usage_publish_errors(), 0u);
}

// One DeleteRange a table takes exactly the periods before the cutoff (7
// days of hours, --usage-history days of days), at the first round and
// once an hour; the totals and the marks stay.
TEST(UsageBucketsEtcd, AgeOutRemovesExactlyTheOldPeriods) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    std::string error;
    auto client = etcd::Client::make(client_options(etcd), error);
    ASSERT_TRUE(client) << error;
    const unsigned char edge[KA_USAGE_EDGE_ID_LEN] = {7};
    unsigned char rec[KA_USAGE_BUCKET_SIZE];
    encode_bucket({1, 0, 0, 1}, rec);
    const std::string value(reinterpret_cast<char *>(rec), sizeof(rec));
    const Id acc = id_of(1), key = id_of(2);
    auto put = [&](Granularity g, uint32_t period) {
        etcd::PutResponse answer;
        ASSERT_TRUE(client->put({etcd_usage_bucket_key(kPrefix, g, period, acc, key, edge), value}, answer).ok());
    };
    Clock clock;  // 09:10
    const uint32_t hour_cut = kH9 - kHourBucketsKept + 1, day_cut = kDay - 30 + 1;
    for (uint32_t h : {hour_cut - 24, hour_cut - 1, hour_cut, kH9}) put(Granularity::kHour, h);
    for (uint32_t d : {day_cut - 100, day_cut - 1, day_cut, kDay}) put(Granularity::kDay, d);
    etcd::PutResponse answer;
    ASSERT_TRUE(client->put({etcd_usage_key(kPrefix, acc, key, edge), std::string(32, '\0')}, answer).ok());
    ASSERT_TRUE(client->put({etcd_usage_mark_key(kPrefix, edge), encode_usage_mark(1, 1)}, answer).ok());

    syncd::Metrics m;
    auto p = syncd::UsagePublisher::make(options(etcd, dir.sub("no-env-yet.usage"), clock, 30), m, error);
    ASSERT_TRUE(p) << error;
    ASSERT_TRUE(p->publish_once()) << "ages out at its first round, with no usage env too";
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    auto periods = [&](Granularity g) {
        std::set<uint32_t> out;
        src->buckets(g, 0, UINT32_MAX, nullptr, nullptr, [&out](const BucketRow &r) { out.insert(r.period); });
        return out;
    };
    EXPECT_EQ(periods(Granularity::kHour), (std::set<uint32_t>{hour_cut, kH9}));
    EXPECT_EQ(periods(Granularity::kDay), (std::set<uint32_t>{day_cut, kDay}));
    etcd::RangeResponse left;
    etcd::RangeRequest all;
    all.key = kPrefix + "/usage";
    all.range_end = etcd::prefix_range_end(all.key);
    all.keys_only = true;
    ASSERT_TRUE(client->range(all, left).ok());
    EXPECT_EQ(left.kvs.size(), 7u) << "4 buckets, the totals, the mark and the history";

    // once an hour: an old bucket put now stays until the next hour's round
    put(Granularity::kHour, hour_cut - 1);
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(periods(Granularity::kHour).count(hour_cut - 1), 1u);
    clock.ms += kMsPerHour;
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(periods(Granularity::kHour), std::set<uint32_t>{kH9})
        << "an hour later the cutoff moved past hour_cut as well";
    EXPECT_EQ(m.usage_publish_errors(), 0u);
}

// Reads clip to the retention window on etcd too: between two of syncd's
// hourly age-outs (or while no syncd runs) an old bucket is still in etcd,
// and GET /v1/usage reads as zeros what is past its keeping: hours after 7
// days, days after the --usage-history the edges' syncd published (#44
// item 12).
TEST(UsageBucketsEtcd, ReadsClipToTheRetentionWindow) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    Store store{std::make_unique<LmdbBackend>(dir.sub("db"))};
    CreatedAccount alice = store.create_account("alice", 100);
    KeySpec spec;
    spec.name = "k";
    spec.scopes = {"ip:read"};
    spec.requested_rpm = 10;
    const KeyRecord k = store.create_key(alice.account.id, spec, Actor::operator_named("test")).key;
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    ConsoleApi api{store, src.get()};
    auto allowed = [&](const std::string &query) {
        HttpRequest r;
        r.method = "GET";
        r.path = "/v1/usage";
        r.query = query;
        r.has_authorization = true;
        r.authorization = "Bearer " + alice.console_token;
        const HttpResponse res = api.handle(r);
        EXPECT_EQ(res.status, 200) << res.body;
        return nlohmann::json::parse(res.body)["totals"]["allowed"].get<uint64_t>();
    };

    // an edge whose syncd keeps 30 days published its history at its first
    // round, then its 09:00 buckets
    Clock clock;
    syncd::Metrics m;
    std::string error;
    const std::string usage_db = dir.sub("edge.usage");
    collect(usage_db, alice.account.id, k.key_id, {5, 0, 0, 5}, kNine + 60000);
    auto p = syncd::UsagePublisher::make(options(etcd, usage_db, clock, 30), m, error);
    ASSERT_TRUE(p) << error;
    ASSERT_TRUE(p->publish_once());
    const std::string hour_q = "granularity=hour&from=" + format_time(kNine) + "&to=" + format_time(kNine + kMsPerHour);
    const std::string day_q = "granularity=day&from=" + format_time(kNine).substr(0, 10) + "&to=" +
                              format_time(kNine).substr(0, 10);
    store.set_clock([] { return kNine + kMsPerHour; });
    EXPECT_EQ(allowed(hour_q), 5u);
    EXPECT_EQ(allowed(day_q), 5u);
    // no syncd round since: the buckets are still in etcd
    store.set_clock([] { return kNine + 9 * kMsPerDay; });
    EXPECT_EQ(allowed(hour_q), 0u) << "an hour 9 days old is past its keeping";
    EXPECT_EQ(allowed(day_q), 5u);
    store.set_clock([] { return kNine + 31 * kMsPerDay; });
    EXPECT_EQ(allowed(day_q), 0u) << "a day 31 days old is past the 30 the edges keep";
    EXPECT_EQ(read(*src, Granularity::kDay, kDay, kDay + 1).sum.size(), 1u) << "still in etcd";
}

// A round that fails (etcd stopped) publishes nothing and is counted; the
// next ones, even periods later, publish everything, older periods included.
TEST(UsageBucketsEtcd, AFailedRoundIsRetriedAndLosesNothing) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge.usage");
    const Id acc = id_of(1), key = id_of(2);
    Clock clock;  // 09:10
    syncd::Metrics m;
    std::string error;
    auto p = syncd::UsagePublisher::make(options(etcd, a, clock), m, error);
    ASSERT_TRUE(p) << error;
    collect(a, acc, key, {3, 0, 0, 3}, kNine + 5 * 60000);
    ASSERT_TRUE(p->publish_once());
    collect(a, acc, key, {4, 1, 0, 4}, kNine + 20 * 60000);
    etcd.stop(0);
    clock.ms = kNine + 3 * kMsPerHour;  // 12:00: 09:xx is two periods back now
    collect(a, acc, key, {1, 0, 0, 1}, kNine + 2 * kMsPerHour + 60000);
    EXPECT_FALSE(p->publish_once());
    clock.ms += 2 * kMsPerHour;  // still down at 14:00
    EXPECT_FALSE(p->publish_once());
    EXPECT_EQ(m.usage_publish_errors(), 2u);
    etcd.resume(0);
    ASSERT_TRUE(p->publish_once());
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    Read hours = read(*src, Granularity::kHour, kH9, kH9 + 24, &acc);
    EXPECT_EQ(hours.sum.size(), 2u);
    EXPECT_EQ((hours.sum[{acc, key, kH9}]), (BucketCounts{7, 1, 0, 7})) << "09:xx, two hours late";
    EXPECT_EQ((hours.sum[{acc, key, kH9 + 2}]), (BucketCounts{1, 0, 0, 1}));
    EXPECT_EQ((read(*src, Granularity::kDay, kDay, kDay + 1).sum[{acc, key, kDay}]), (BucketCounts{8, 1, 0, 8}));
}

// A restarted syncd (an empty cache) resumes from its mark in etcd: it puts
// the previous period on again, plus whatever was collected while it was
// away, and nothing older.
TEST(UsageBucketsEtcd, ARestartResumesFromTheMark) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge.usage");
    const Id acc = id_of(1);
    Clock clock;
    // three keys used in hours 00..09 of the day
    for (uint32_t h = 0; h < 10; h++) {
        for (unsigned char k = 2; k < 5; k++) collect(a, acc, id_of(k), {1, 0, 0, 1}, kNine - (9 - h) * kMsPerHour);
    }
    std::string error;
    {
        syncd::Metrics m;
        auto p = syncd::UsagePublisher::make(options(etcd, a, clock), m, error);
        ASSERT_TRUE(p) << error;
        ASSERT_TRUE(p->publish_once());
        EXPECT_EQ(m.usage_buckets_published(), 33u) << "a new edge: everything it holds";
    }
    {  // restarted in the same hour: the previous hour and the current one, the day
        syncd::Metrics m;
        auto p = syncd::UsagePublisher::make(options(etcd, a, clock), m, error);
        ASSERT_TRUE(p) << error;
        ASSERT_TRUE(p->publish_once());
        EXPECT_EQ(m.usage_buckets_published(), 9u) << "hours 08 and 09 and the day, of 3 keys";
    }
    // syncd away from 09:10 to 13:30 while the edge collected at 11:xx
    collect(a, acc, id_of(2), {5, 0, 0, 5}, kNine + 2 * kMsPerHour + 60000);
    clock.ms = kNine + 4 * kMsPerHour + 30 * 60000;
    syncd::Metrics m;
    auto p = syncd::UsagePublisher::make(options(etcd, a, clock), m, error);
    ASSERT_TRUE(p) << error;
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(m.usage_buckets_published(), 3u + 3u + 1u + 3u) << "08, 09 (from the mark), 11; the days";
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    const Id k2 = id_of(2);
    EXPECT_EQ((read(*src, Granularity::kHour, kH9 + 2, kH9 + 3, &acc, &k2).sum[{acc, k2, kH9 + 2}]),
              (BucketCounts{5, 0, 0, 5}));
    EXPECT_EQ((read(*src, Granularity::kDay, kDay, kDay + 1, &acc, &k2).sum[{acc, k2, kDay}]),
              (BucketCounts{15, 0, 0, 15}));
    // the next round reads from 12:00 on: nothing changed, nothing put
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(m.usage_buckets_published(), 10u);
}

// Past a page of the whole window, one account is read one period at a time
// (never the other accounts' buckets); all accounts in pages: the same sums.
TEST(UsageBucketsEtcd, ABusyWindowIsReadPerPeriodForOneAccount) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge.usage");
    {
        std::string err;
        auto env = UsageEnv::open(a, err);
        ASSERT_TRUE(env) << err;
        std::vector<UsageDelta> ds(5200);
        for (size_t i = 0; i < ds.size(); i++) {
            UsageDelta &d = ds[i];
            d = UsageDelta{};
            Id acc = id_of(0x40), key = id_of(0x50);
            acc[11] = static_cast<unsigned char>(i % 200);
            key[10] = static_cast<unsigned char>(i >> 8);
            key[11] = static_cast<unsigned char>(i);
            std::memcpy(d.account_id, acc.data(), KA_ID_LEN);
            std::memcpy(d.key_id, key.data(), KA_ID_LEN);
            d.allowed = d.units = 1 + i % 3;
            d.last_used_ms = kNine;
        }
        ASSERT_TRUE(env->add(ds.data(), ds.size(), kNine, err)) << err;
    }
    Clock clock;
    syncd::Metrics m;
    std::string error;
    auto p = syncd::UsagePublisher::make(options(etcd, a, clock), m, error);
    ASSERT_TRUE(p) << error;
    ASSERT_TRUE(p->publish_once());
    EXPECT_EQ(m.usage_buckets_published(), 10400u);
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    Read all = read(*src, Granularity::kHour, kH9, kH9 + 1);
    EXPECT_EQ(all.sum.size(), 5200u);
    Id acc = id_of(0x40);
    acc[11] = 7;
    Read one = read(*src, Granularity::kHour, kH9, kH9 + 1, &acc);  // 5,200 keys in 1 period: per period
    EXPECT_EQ(one.sum.size(), 26u);
    uint64_t allowed = 0;
    for (const auto &[k, c] : one.sum) {
        EXPECT_EQ(std::get<0>(k), acc);
        allowed += c.allowed;
    }
    uint64_t expect = 0;
    for (size_t i = 7; i < 5200; i += 200) expect += 1 + i % 3;
    EXPECT_EQ(allowed, expect);
    // and the same account over a window wide enough for one range
    Read wide = read(*src, Granularity::kHour, kH9 - 100, kH9 + 1, &acc);
    EXPECT_EQ(wide.sum, one.sum);
    // stopped etcd: said, never zeros
    etcd.kill(0);
    EXPECT_THROW(read(*src, Granularity::kDay, kDay, kDay + 1, &acc), StoreError);
}

// A backlog (here a new edge's ten hours, 2 keys each) is read a bounded
// number of buckets a round, in whole periods, oldest first; the mark
// follows, so a restart in the middle goes on where the last round stopped.
TEST(UsageBucketsEtcd, ABacklogGoesOnInWholePeriodsAcrossRestarts) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const std::string a = dir.sub("edge.usage");
    const Id acc = id_of(1);
    for (uint32_t h = 0; h < 10; h++) {
        for (unsigned char k = 2; k < 4; k++) collect(a, acc, id_of(k), {1, 0, 0, 1}, kNine - (9 - h) * kMsPerHour);
    }
    Clock clock;  // 09:10
    std::string error;
    auto make = [&](syncd::Metrics &m) {
        syncd::UsagePublisherOptions o = options(etcd, a, clock);
        o.buckets_per_round = 5;
        return syncd::UsagePublisher::make(o, m, error);
    };
    syncd::Metrics m1;
    auto p1 = make(m1);
    ASSERT_TRUE(p1) << error;
    ASSERT_TRUE(p1->publish_once());
    EXPECT_EQ(m1.usage_buckets_published(), 6u + 2u) << "hours 00 to 02 (whole), the 2 days";
    auto src = make_etcd_usage_source(client_options(etcd), kPrefix);
    EXPECT_EQ(read(*src, Granularity::kHour, kH9 - 24, kH9 + 1, &acc).sum.size(), 6u);
    {  // restarted: from its mark, 03
        syncd::Metrics m2;
        auto p2 = make(m2);
        ASSERT_TRUE(p2) << error;
        ASSERT_TRUE(p2->publish_once());
        EXPECT_EQ(m2.usage_buckets_published(), 6u + 2u) << "hours 03 to 05; the days again (an empty cache)";
    }
    ASSERT_TRUE(p1->publish_once());  // 03 to 05 again (p1's mark was 03), then 06 to 08 next
    ASSERT_TRUE(p1->publish_once());
    ASSERT_TRUE(p1->publish_once());
    EXPECT_EQ(m1.usage_buckets_published(), 8u + 6u + 6u + 2u);
    Read hours = read(*src, Granularity::kHour, kH9 - 24, kH9 + 1, &acc);
    EXPECT_EQ(hours.sum.size(), 20u) << "every hour of both keys";
    for (const auto &[k, c] : hours.sum) EXPECT_EQ(c, (BucketCounts{1, 0, 0, 1}));
    ASSERT_TRUE(p1->publish_once());
    EXPECT_EQ(m1.usage_buckets_published(), 22u) << "caught up: nothing changed";
}
