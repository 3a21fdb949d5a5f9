// Quotas across edges (issue 28): each edge's keyauth-syncd publishes what
// its nginx workers charged to each quota (from the edge's quota ledger) to
// etcd, and counts what the other edges charged into its own ledger. Real
// etcd members on loopback (tests/etcd_cluster.h); each fake edge is a usage
// dir with its usage env (the edge id) and quota ledger, charged as the
// workers charge it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "etcd_client.h"
#include "etcd_cluster.h"
#include "etcd_keyspace.h"
#include "mutation.h"
#include "quota_edge.h"
#include "quota_exchange.h"
#include "quota_keyspace.h"
#include "quota_ledger.h"
#include "quota_period.h"
#include "quota_usage.h"
#include "record_changes.h"
#include "syncd_metrics.h"
#include "temp_dir.h"
#include "usage_env.h"
#include "usage_publisher.h"

using namespace keyauth;
using keyauth::testing::EtcdCluster;
using keyauth::testing::TempDir;
using namespace keyauth::testing::quota;

namespace {

// Every key under "<prefix>/quota/", and its value.
std::map<std::string, QuotaUse> quota_keys(const EtcdCluster &etcd) {
    std::string error;
    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto c = etcd::Client::make(co, error);
    std::map<std::string, QuotaUse> out;
    if (!c) return out;
    etcd::RangeRequest r;
    r.key = etcd_quota_prefix(kPrefix);
    r.range_end = etcd::prefix_range_end(r.key);
    etcd::RangeResponse answer;
    if (!c->range(r, answer).ok()) return out;
    for (const auto &kv : answer.kvs) decode_quota_use(kv.value, out[kv.key]);
    return out;
}

}  // namespace

TEST(QuotaKeyspace, KeysAndValuesRoundTripAndStrangersAreRefused) {
    const unsigned char edge[KA_USAGE_EDGE_ID_LEN] = {0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff};
    // an account's month quota: class 0x80 | parity << 4 | month (2) << 2 | account (2)
    const uint16_t month = 0x8000 | 683;  // an odd month number
    const uint8_t cls = quota_slot_class(QuotaSubject::kAccount, month);
    EXPECT_EQ(cls, 0x80 | 0x10 | 0x08 | 0x02);
    const std::string k = etcd_quota_key(kPrefix, cls, id_of(0xc3), edge);
    EXPECT_EQ(k, "/keyauth/1/quota/9ac3c3c3c3c3c3c3c3c3c3c3c3/ab0102030405060708090aff");
    EXPECT_EQ(etcd_quota_class_prefix(kPrefix, static_cast<uint8_t>(QuotaSubject::kKey), id_of(1)),
              "/keyauth/1/quota/01010101010101010101010101");
    const std::string within = etcd_quota_prefix(kPrefix);
    QuotaKeyName n;
    ASSERT_TRUE(parse_etcd_quota_key(within, k, n));
    EXPECT_EQ(n.subject, QuotaSubject::kAccount);
    EXPECT_EQ(n.cls, cls);
    // an earlier build's key: the subject alone
    ASSERT_TRUE(parse_etcd_quota_key(
        within, etcd_quota_key(kPrefix, static_cast<uint8_t>(QuotaSubject::kKey), id_of(0xc3), edge), n));
    EXPECT_EQ(n.subject, QuotaSubject::kKey);
    EXPECT_EQ(n.cls, 1);
    // a class no ledger makes: a total with a parity bit, or no kind
    for (const uint8_t bad : {uint8_t{0x80 | 0x10 | 0x0c | 0x01}, uint8_t{0x80 | 0x01}, uint8_t{0x83}}) {
        EXPECT_FALSE(parse_etcd_quota_key(within, etcd_quota_key(kPrefix, bad, id_of(0xc3), edge), n))
            << int(bad);
    }
    EXPECT_EQ(n.id, id_of(0xc3));
    EXPECT_EQ(std::memcmp(n.edge_id, edge, sizeof(edge)), 0);
    EXPECT_FALSE(parse_etcd_quota_key(within, k + "0", n));
    EXPECT_FALSE(parse_etcd_quota_key(within, k.substr(0, k.size() - 1) + "G", n));
    std::string bent = k;
    bent[within.size() + 1] = '3';  // subject 3: not one
    EXPECT_FALSE(parse_etcd_quota_key(within, bent, n));
    bent = k;
    bent[within.size() + 26] = '_';
    EXPECT_FALSE(parse_etcd_quota_key(within, bent, n));
    EXPECT_FALSE(parse_etcd_quota_key(etcd_quota_prefix("/other"), k, n));

    const QuotaUse use{0x4123, (uint64_t{1} << 48) - 1};
    const std::string v = encode_quota_use(use);
    EXPECT_EQ(v.size(), kQuotaUseSize);
    QuotaUse back;
    ASSERT_TRUE(decode_quota_use(v, back));
    EXPECT_EQ(back, use);
    EXPECT_FALSE(decode_quota_use(v + "x", back));
    std::string v2 = v;
    v2[0] = 2;
    EXPECT_FALSE(decode_quota_use(v2, back)) << "a layout this build does not know";
}

// syncd's watch ends before the quota exchange and after every mirrored table.
TEST(QuotaKeyspace, SyncdsWatchEndsBeforeQuotas) {
    const std::string end = syncd::watched_end(kPrefix);
    EXPECT_LE(end, etcd_quota_prefix(kPrefix)) << "quota use is never watched";
    for (size_t i = 0; i < kTableCount; i++) {
        const Table t = static_cast<Table>(i);
        // the webhook sender's tables and the leak reports (keyauthd's
        // alone) sort after: no edge watches their churn
        if (is_webhook_table(t) || t == Table::kReportedLeaks)
            EXPECT_GE(etcd_table_prefix(kPrefix, t), end) << table_name(t);
        else EXPECT_LT(etcd_table_prefix(kPrefix, t), etcd_quota_prefix(kPrefix)) << table_name(t);
    }
    EXPECT_FALSE(syncd::record_change(kPrefix, etcd_quota_prefix(kPrefix) + "01/02", std::string("x")))
        << "not a record";
}

TEST(QuotaExchange, EachEdgeCountsTheOthersUse) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    Edge a(dir.sub("a.usage")), b(dir.sub("b.usage")), c(dir.sub("c.usage"));
    syncd::Metrics ma, mb, mc;
    std::string error;
    auto xa = syncd::QuotaExchange::make(exchange_options(etcd, a.usage_db), ma, error);
    auto xb = syncd::QuotaExchange::make(exchange_options(etcd, b.usage_db), mb, error);
    auto xc = syncd::QuotaExchange::make(exchange_options(etcd, c.usage_db), mc, error);
    ASSERT_TRUE(xa && xb && xc) << error;
    const int64_t now = kDecemberFirst + 3600000;
    const Id key = id_of(1), account = id_of(2), lone = id_of(3);

    ASSERT_TRUE(a.charge(QuotaSubject::kKey, key, 10, now));
    ASSERT_TRUE(a.charge(QuotaSubject::kAccount, account, 3, now));
    ASSERT_TRUE(b.charge(QuotaSubject::kKey, key, 5, now));
    ASSERT_TRUE(c.charge(QuotaSubject::kKey, lone, 1, now));
    const uint64_t c_slots = c.ledger->slots_in_use();
    for (auto *x : {xa.get(), xb.get(), xc.get(), xa.get()}) ASSERT_TRUE(x->exchange_once(now));
    EXPECT_EQ(ma.quota_published(), 2u);
    EXPECT_EQ(mb.quota_published(), 1u);
    EXPECT_EQ(quota_keys(etcd).size(), 4u) << "one key per subject and edge";

    EXPECT_EQ(a.used(QuotaSubject::kKey, key, now), 15u) << "its own 10 and b's 5";
    EXPECT_EQ(b.used(QuotaSubject::kKey, key, now), 15u) << "b's round came after a's";
    EXPECT_EQ(b.used(QuotaSubject::kKey, lone, now), 0u) << "and before c's";
    EXPECT_EQ(a.used(QuotaSubject::kKey, lone, now), 1u) << "c's, on an edge that never served it";
    EXPECT_EQ(c.used(QuotaSubject::kAccount, account, now), 3u);
    EXPECT_EQ(c.used(QuotaSubject::kKey, key, now), 15u);
    EXPECT_EQ(c.ledger->slots_in_use(), c_slots + 2) << "the key and the account: used elsewhere";
    ASSERT_TRUE(xb->exchange_once(now));
    EXPECT_EQ(b.used(QuotaSubject::kKey, key, now), 15u);
    EXPECT_EQ(b.used(QuotaSubject::kKey, lone, now), 1u);

    // the fleet's use is what an edge admits against
    EXPECT_FALSE(a.charge(QuotaSubject::kKey, key, 6, now, 20)) << "15 + 6 > 20";
    ASSERT_TRUE(a.charge(QuotaSubject::kKey, key, 5, now, 20));

    // only what changed is put again; nothing for a subject with no use here
    const uint64_t before = ma.quota_published();
    ASSERT_TRUE(xa->exchange_once(now));
    EXPECT_EQ(ma.quota_published(), before + 1);
    ASSERT_TRUE(xa->exchange_once(now));
    EXPECT_EQ(ma.quota_published(), before + 1);
    ASSERT_TRUE(xb->exchange_once(now));
    EXPECT_EQ(b.used(QuotaSubject::kKey, key, now), 20u);

    // keyauthd's view (etcd mode): every edge's use of the subject
    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto src = make_quota_usage_source("", co, kPrefix);
    EXPECT_EQ(src->used(QuotaSubject::kKey, key, KA_QUOTA_DAY, now), 20u);
    EXPECT_EQ(src->used(QuotaSubject::kAccount, account, KA_QUOTA_DAY, now), 3u);
    EXPECT_EQ(src->used(QuotaSubject::kAccount, key, KA_QUOTA_DAY, now), 0u) << "another subject";
    EXPECT_EQ(src->used(QuotaSubject::kKey, key, KA_QUOTA_MONTH, now), 0u) << "another period";
    EXPECT_EQ(src->used(QuotaSubject::kKey, key, KA_QUOTA_DAY, now + kDay), 0u) << "the next day";
}

TEST(QuotaExchange, ThePeriodsEndAndTheirKeysGo) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    Edge a(dir.sub("a.usage")), b(dir.sub("b.usage"));
    syncd::Metrics ma, mb;
    std::string error;
    auto xa = syncd::QuotaExchange::make(exchange_options(etcd, a.usage_db), ma, error);
    auto xb = syncd::QuotaExchange::make(exchange_options(etcd, b.usage_db), mb, error);
    ASSERT_TRUE(xa && xb) << error;
    const int64_t today = kDecemberFirst + 3600000, tomorrow = today + kDay;
    // more subjects than one txn takes
    for (int i = 0; i < 300; i++) {
        Id k = id_of(9);
        k[11] = static_cast<unsigned char>(i);
        k[10] = static_cast<unsigned char>(i >> 8);
        ASSERT_TRUE(a.charge(QuotaSubject::kKey, k, 1, today));
    }
    ASSERT_TRUE(xa->exchange_once(today));
    EXPECT_EQ(ma.quota_published(), 300u) << "in three transactions";
    ASSERT_TRUE(xb->exchange_once(today));
    Id k7 = id_of(9);
    k7[10] = 0;
    k7[11] = 7;
    EXPECT_EQ(b.used(QuotaSubject::kKey, k7, today), 1u);

    // the next day: yesterday's use counts for nothing, and goes from etcd,
    // at most 128 keys a round
    ASSERT_TRUE(b.charge(QuotaSubject::kKey, k7, 2, tomorrow, 2)) << "a full quota again";
    ASSERT_TRUE(xa->exchange_once(tomorrow));
    EXPECT_EQ(quota_keys(etcd).size(), 300u - 128u);
    ASSERT_TRUE(xa->exchange_once(tomorrow));
    ASSERT_TRUE(xa->exchange_once(tomorrow));
    ASSERT_TRUE(xb->exchange_once(tomorrow));
    const auto left = quota_keys(etcd);
    ASSERT_EQ(left.size(), 1u) << "b's use of today";
    EXPECT_EQ(left.begin()->second.used, 2u);
    EXPECT_EQ(a.used(QuotaSubject::kKey, k7, tomorrow), 0u);
    ASSERT_TRUE(xa->exchange_once(tomorrow));
    EXPECT_EQ(a.used(QuotaSubject::kKey, k7, tomorrow), 2u);
}

// #44: a quota whose period kind changes and back keeps the fleet's use of
// each kind: every period class of a subject has its own key in etcd (one
// key per subject and edge held one period, and a switch overwrote it).
TEST(QuotaExchange, AKindSwitchedAndBackKeepsTheFleetsUseOfEachKind) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    Edge a(dir.sub("a.usage")), b(dir.sub("b.usage"));
    syncd::Metrics ma, mb;
    std::string error;
    auto xa = syncd::QuotaExchange::make(exchange_options(etcd, a.usage_db), ma, error);
    auto xb = syncd::QuotaExchange::make(exchange_options(etcd, b.usage_db), mb, error);
    ASSERT_TRUE(xa && xb) << error;
    const int64_t now = kDecemberFirst + 3600000;
    const Id key = id_of(5);
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, now);
    auto credits = [&](Edge &e, uint64_t n) {
        QuotaRef ref;
        uint64_t after;
        ASSERT_TRUE(e.ledger->find(QuotaSubject::kKey, key.data(), total, now, ref));
        ASSERT_EQ(e.ledger->charge(QuotaSubject::kKey, key.data(), ref, total, n, 10, true, now, &after),
                  QuotaLedger::Charge::kCharged);
    };
    credits(a, 2);
    credits(b, 1);
    for (auto *x : {xa.get(), xb.get(), xa.get()}) ASSERT_TRUE(x->exchange_once(now));
    EXPECT_EQ(a.ledger->used(QuotaSubject::kKey, key.data(), total), 3u);
    // switched to a day quota: each edge charges its day
    ASSERT_TRUE(a.charge(QuotaSubject::kKey, key, 4, now));
    ASSERT_TRUE(b.charge(QuotaSubject::kKey, key, 1, now));
    for (auto *x : {xa.get(), xb.get(), xa.get()}) ASSERT_TRUE(x->exchange_once(now));
    EXPECT_EQ(a.used(QuotaSubject::kKey, key, now), 5u);
    EXPECT_EQ(quota_keys(etcd).size(), 4u) << "a key per edge and class: total and day";
    // and back to credits: the fleet's 3 are still used, on both edges
    EXPECT_EQ(a.ledger->used(QuotaSubject::kKey, key.data(), total), 3u);
    EXPECT_EQ(b.ledger->used(QuotaSubject::kKey, key.data(), total), 3u);
    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto src = make_quota_usage_source("", co, kPrefix);
    EXPECT_EQ(src->used(QuotaSubject::kKey, key, KA_QUOTA_TOTAL, now), 3u) << "keyauthd's view";
    EXPECT_EQ(src->used(QuotaSubject::kKey, key, KA_QUOTA_DAY, now), 5u);
}

// An edge of an earlier build keeps its use under the subject byte alone:
// this build counts it (a rolling upgrade loses nothing), keyauthd too, and
// an edge that was of that build moves its own to the class key.
TEST(QuotaExchange, AnEarlierBuildsKeysCountAndMove) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    Edge a(dir.sub("a.usage"));
    syncd::Metrics ma;
    std::string error;
    auto xa = syncd::QuotaExchange::make(exchange_options(etcd, a.usage_db), ma, error);
    ASSERT_TRUE(xa) << error;
    const int64_t now = kDecemberFirst + 3600000;
    const uint16_t day = quota_period_tag(KA_QUOTA_DAY, now);
    const Id account = id_of(6);
    etcd::ClientOptions co;
    co.endpoints = etcd.endpoint_list();
    auto c = etcd::Client::make(co, error);
    ASSERT_TRUE(c) << error;
    const unsigned char old_edge[KA_USAGE_EDGE_ID_LEN] = {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    const auto legacy = static_cast<uint8_t>(QuotaSubject::kAccount);
    etcd::PutResponse put;
    ASSERT_TRUE(c->put(etcd::PutRequest{etcd_quota_key(kPrefix, legacy, account, old_edge),
                                        encode_quota_use(QuotaUse{day, 7})},
                       put)
                    .ok());
    // a's own key of the earlier build, and the use its ledger holds
    unsigned char a_edge[KA_USAGE_EDGE_ID_LEN];
    ASSERT_TRUE(syncd::read_usage_edge_id(a.usage_db, a_edge, error)) << error;
    ASSERT_TRUE(c->put(etcd::PutRequest{etcd_quota_key(kPrefix, legacy, account, a_edge),
                                        encode_quota_use(QuotaUse{day, 2})},
                       put)
                    .ok());
    ASSERT_TRUE(a.charge(QuotaSubject::kAccount, account, 2, now));
    ASSERT_TRUE(xa->exchange_once(now));
    EXPECT_EQ(a.used(QuotaSubject::kAccount, account, now), 9u) << "its 2 and the earlier build's edge's 7";
    auto src = make_quota_usage_source("", co, kPrefix);
    EXPECT_EQ(src->used(QuotaSubject::kAccount, account, KA_QUOTA_DAY, now), 9u);
    const auto keys = quota_keys(etcd);
    EXPECT_EQ(keys.size(), 2u) << "a's key of the earlier build went; the other edge's stays";
    EXPECT_EQ(keys.count(etcd_quota_key(kPrefix, legacy, account, a_edge)), 0u);
    EXPECT_EQ(keys.count(etcd_quota_key(kPrefix, quota_slot_class(QuotaSubject::kAccount, day), account, a_edge)),
              1u);
}

TEST(QuotaExchange, NoLedgerNoEdgeIdAndEtcdDown) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    TempDir dir;
    const int64_t now = kDecemberFirst;
    syncd::Metrics m, mb;
    std::string error;
    // no ledger yet: nothing to do, not a failure
    auto x = syncd::QuotaExchange::make(exchange_options(etcd, dir.sub("none.usage")), m, error);
    ASSERT_TRUE(x) << error;
    EXPECT_TRUE(x->exchange_once(now));

    // a ledger but no usage env (no edge id yet): counts every edge's use,
    // publishes nothing
    Edge a(dir.sub("a.usage")), fresh(dir.sub("fresh.usage"), /*with_env=*/false);
    auto xa = syncd::QuotaExchange::make(exchange_options(etcd, a.usage_db), m, error);
    auto xf = syncd::QuotaExchange::make(exchange_options(etcd, fresh.usage_db), mb, error);
    ASSERT_TRUE(xa && xf) << error;
    ASSERT_TRUE(a.charge(QuotaSubject::kAccount, id_of(4), 7, now));
    ASSERT_TRUE(fresh.charge(QuotaSubject::kAccount, id_of(4), 1, now));
    ASSERT_TRUE(xa->exchange_once(now));
    ASSERT_TRUE(xf->exchange_once(now));
    EXPECT_EQ(mb.quota_published(), 0u);
    EXPECT_EQ(fresh.used(QuotaSubject::kAccount, id_of(4), now), 8u);
    EXPECT_EQ(quota_keys(etcd).size(), 1u);

    // etcd down: counted, and made good by a later round
    ASSERT_TRUE(a.charge(QuotaSubject::kAccount, id_of(4), 1, now));
    etcd.stop(0);
    EXPECT_FALSE(xa->exchange_once(now));
    EXPECT_EQ(m.quota_exchange_errors(), 1u);
    etcd.resume(0);
    ASSERT_TRUE(xa->exchange_once(now));
    EXPECT_EQ(quota_keys(etcd).begin()->second.used, 8u);
    EXPECT_GT(m.quota_exchanged_ms(), 0);

    // a ledger made anew (removed by an operator, made again by the workers)
    // is the one written to
    const std::string path = fresh.usage_db + "/" KA_QUOTA_LEDGER_FILE;
    ASSERT_EQ(::unlink(path.c_str()), 0);
    std::string err;
    fresh.ledger = QuotaLedger::open(path, true, err, 1024);
    ASSERT_TRUE(fresh.ledger) << err;
    EXPECT_EQ(fresh.used(QuotaSubject::kAccount, id_of(4), now), 0u);
    ASSERT_TRUE(xf->exchange_once(now));
    EXPECT_EQ(fresh.used(QuotaSubject::kAccount, id_of(4), now), 8u);
}
