// Quotas across edges through Redis (issue 28, --quota-redis): the batch
// codec, and keyauth-syncd's Redis transport against a real redis-server
// and real etcd members on loopback: each edge hears the others' cumulative
// use through the stream, counts max(etcd's, Redis's) per subject, and falls
// back to etcd's when Redis is down or answers garbage.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include "free_ports.h"
#include "quota_batch.h"
#include "quota_edge.h"
#include "quota_redis.h"
#include "redis_server.h"
#include "syncd_metrics.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::syncd::QuotaRecord;
using keyauth::testing::EtcdCluster;
using keyauth::testing::RedisServer;
using keyauth::testing::TempDir;
using namespace keyauth::testing::quota;

namespace {

QuotaRecord record(QuotaSubject s, unsigned char id, uint16_t tag, uint64_t units) {
    QuotaRecord r;
    r.subject = s;
    r.id = id_of(id);
    r.tag = tag;
    r.units = units;
    return r;
}

syncd::QuotaRedisOptions redis_options(int port) {
    syncd::QuotaRedisOptions o;
    o.port = port;
    o.timeout = std::chrono::milliseconds(500);
    return o;
}

// RESP for one command (binary-safe), as a client would send it.
std::string resp(const std::vector<std::string> &args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string &a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return out;
}

// One edge of the fleet: its ledger, its etcd exchange and its Redis transport.
struct Fleet {
    Fleet(const EtcdCluster &etcd, const std::string &usage_db, int redis_port)
        : edge(usage_db), x(syncd::QuotaExchange::make(exchange_options(etcd, usage_db), m, error)),
          r(std::make_unique<syncd::QuotaRedis>(redis_options(redis_port), *x, m)) {
        m.enable_quota_redis();
    }
    Edge edge;
    syncd::Metrics m;
    std::string error;
    std::unique_ptr<syncd::QuotaExchange> x;
    std::unique_ptr<syncd::QuotaRedis> r;
};

const int64_t kNow = kDecemberFirst + 3600000;
const uint16_t kToday = quota_period_tag(KA_QUOTA_DAY, kNow);

}  // namespace

TEST(QuotaRedisBatch, RoundTrip) {
    std::string batch;
    const QuotaRecord a = record(QuotaSubject::kKey, 1, kToday, 0);
    const QuotaRecord b = record(QuotaSubject::kAccount, 0xfe, quota_period_tag(KA_QUOTA_TOTAL, kNow),
                                 syncd::kMaxQuotaUnits);
    syncd::append_quota_record(batch, a);
    syncd::append_quota_record(batch, b);
    ASSERT_EQ(batch.size(), 2 * syncd::kQuotaRecordBytes);
    EXPECT_EQ(static_cast<unsigned char>(batch[13]), kToday & 0xff) << "little endian";
    std::vector<QuotaRecord> out;
    size_t skipped = 0;
    ASSERT_TRUE(syncd::decode_quota_batch(batch, out, skipped));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0], a);
    EXPECT_EQ(out[1], b);
    EXPECT_EQ(skipped, 0u);

    std::string full;
    for (size_t i = 0; i < syncd::kMaxQuotaRecords; i++) syncd::append_quota_record(full, a);
    out.clear();
    EXPECT_TRUE(syncd::decode_quota_batch(full, out, skipped));
    EXPECT_EQ(out.size(), syncd::kMaxQuotaRecords);
}

TEST(QuotaRedisBatch, MalformedIsRefusedOrSkipped) {
    std::vector<QuotaRecord> out;
    size_t skipped = 0;
    std::string one;
    syncd::append_quota_record(one, record(QuotaSubject::kKey, 1, kToday, 5));
    // the batch as a whole
    EXPECT_FALSE(syncd::decode_quota_batch("", out, skipped)) << "empty";
    EXPECT_FALSE(syncd::decode_quota_batch(one + "x", out, skipped)) << "not whole records";
    EXPECT_FALSE(syncd::decode_quota_batch(one.substr(1), out, skipped)) << "short";
    std::string big;
    for (size_t i = 0; i <= syncd::kMaxQuotaRecords; i++) big += one;
    EXPECT_FALSE(syncd::decode_quota_batch(big, out, skipped)) << "over 1,024 records";
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(skipped, 0u);

    // one record: skipped, the others taken
    std::string bad_subject = one, no_kind = one, too_many = one;
    bad_subject[0] = 3;
    no_kind[14] = 0;  // tag's top two bits: 0, no period kind
    no_kind[13] = 0;
    too_many = "";
    syncd::append_quota_record(too_many, record(QuotaSubject::kKey, 1, kToday, syncd::kMaxQuotaUnits + 1));
    std::string zero_subject = one;
    zero_subject[0] = 0;
    ASSERT_TRUE(syncd::decode_quota_batch(bad_subject + one + no_kind + too_many + zero_subject, out, skipped));
    EXPECT_EQ(out.size(), 1u);
    EXPECT_EQ(skipped, 4u);
}

TEST(QuotaRedisUrl, ParsesAndRefuses) {
    syncd::QuotaRedisOptions o;
    std::string error;
    ASSERT_TRUE(syncd::parse_quota_redis_url("redis://10.0.0.5", o, error)) << error;
    EXPECT_EQ(o.host, "10.0.0.5");
    EXPECT_EQ(o.port, 6379);
    ASSERT_TRUE(syncd::parse_quota_redis_url("redis://edge@redis.internal:6380/", o, error)) << error;
    EXPECT_EQ(o.user, "edge");
    EXPECT_EQ(o.host, "redis.internal");
    EXPECT_EQ(o.port, 6380);
    ASSERT_TRUE(syncd::parse_quota_redis_url("redis://[::1]:7000", o, error)) << error;
    EXPECT_EQ(o.host, "::1");
    EXPECT_EQ(o.port, 7000);
    for (const char *bad : {"http://h", "redis://", "redis://h:0", "redis://h:65536", "redis://h:x",
                            "redis://u:secret@h", "redis://@h", "redis://[::1", "redis://h/db"}) {
        EXPECT_FALSE(syncd::parse_quota_redis_url(bad, o, error)) << bad;
    }
    EXPECT_EQ(error.find("secret"), std::string::npos);
}

TEST(QuotaRedis, EdgesHearEachOthersCumulativeUse) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    RedisServer redis;
    ASSERT_GT(redis.port(), 0);
    TempDir dir;
    Fleet a(etcd, dir.sub("a.usage"), redis.port()), b(etcd, dir.sub("b.usage"), redis.port());
    ASSERT_TRUE(a.x && b.x) << a.error << b.error;
    const Id key = id_of(1), account = id_of(2);

    ASSERT_TRUE(a.edge.charge(QuotaSubject::kKey, key, 10, kNow));
    ASSERT_TRUE(a.edge.charge(QuotaSubject::kAccount, account, 3, kNow));
    ASSERT_TRUE(b.edge.charge(QuotaSubject::kKey, key, 5, kNow));
    ASSERT_TRUE(a.r->exchange_once(kNow));
    ASSERT_TRUE(b.r->exchange_once(kNow));
    ASSERT_TRUE(a.r->exchange_once(kNow));
    EXPECT_EQ(a.m.quota_redis_published(), 2u);
    EXPECT_EQ(b.m.quota_redis_published(), 1u);
    EXPECT_TRUE(a.m.quota_redis_up());
    EXPECT_EQ(b.edge.used(QuotaSubject::kKey, key, kNow), 15u) << "its own 5 and a's 10, with no etcd round";
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 3u);
    EXPECT_EQ(a.edge.used(QuotaSubject::kKey, key, kNow), 15u);
    EXPECT_EQ(a.m.quota_redis_errors() + b.m.quota_redis_errors(), 0u);

    // only what changed is published again
    ASSERT_TRUE(a.r->exchange_once(kNow));
    EXPECT_EQ(a.m.quota_redis_published(), 2u);
    ASSERT_TRUE(a.edge.charge(QuotaSubject::kKey, key, 4, kNow));
    ASSERT_TRUE(a.r->exchange_once(kNow));
    EXPECT_EQ(a.m.quota_redis_published(), 3u);

    // cumulative values: a's use republished (a restarted syncd publishes
    // everything), and an etcd round counting the same use, count it once
    auto again = std::make_unique<syncd::QuotaRedis>(redis_options(redis.port()), *a.x, a.m);
    ASSERT_TRUE(again->exchange_once(kNow));
    ASSERT_TRUE(again->exchange_once(kNow));
    ASSERT_TRUE(a.x->exchange_once(kNow));
    ASSERT_TRUE(b.x->exchange_once(kNow));
    ASSERT_TRUE(b.r->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kKey, key, kNow), 19u) << "5 + a's 14, once";
    ASSERT_TRUE(b.x->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kKey, key, kNow), 19u) << "max(etcd's 14, Redis's 14)";

    // the fleet's use is what an edge admits against
    EXPECT_FALSE(b.edge.charge(QuotaSubject::kKey, key, 2, kNow, 20));
    EXPECT_TRUE(b.edge.charge(QuotaSubject::kKey, key, 1, kNow, 20));

    // a restarted reader relearns the fleet's values from the stream
    Edge fresh(dir.sub("c.usage"));
    syncd::Metrics mc;
    std::string error;
    auto xc = syncd::QuotaExchange::make(exchange_options(etcd, fresh.usage_db), mc, error);
    ASSERT_TRUE(xc) << error;
    syncd::QuotaRedis rc(redis_options(redis.port()), *xc, mc);
    ASSERT_TRUE(b.r->exchange_once(kNow));
    ASSERT_TRUE(rc.exchange_once(kNow));
    EXPECT_EQ(fresh.used(QuotaSubject::kKey, key, kNow), 20u) << "a's 14 and b's 6";
    EXPECT_EQ(fresh.used(QuotaSubject::kAccount, account, kNow), 3u);

    // the next day, yesterday's use counts for nothing
    const int64_t tomorrow = kNow + kDay;
    ASSERT_TRUE(rc.exchange_once(tomorrow));
    EXPECT_TRUE(rc.sums().empty());
    EXPECT_EQ(fresh.used(QuotaSubject::kKey, key, tomorrow), 0u);
}

TEST(QuotaRedis, RedisDownFallsBackToEtcdAndRecovers) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    RedisServer redis;
    ASSERT_GT(redis.port(), 0);
    TempDir dir;
    Fleet a(etcd, dir.sub("a.usage"), redis.port()), b(etcd, dir.sub("b.usage"), redis.port());
    ASSERT_TRUE(a.x && b.x) << a.error << b.error;
    const Id account = id_of(7);

    ASSERT_TRUE(a.edge.charge(QuotaSubject::kAccount, account, 10, kNow));
    ASSERT_TRUE(a.x->exchange_once(kNow));
    ASSERT_TRUE(b.x->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 10u) << "etcd's";
    ASSERT_TRUE(a.edge.charge(QuotaSubject::kAccount, account, 5, kNow));
    ASSERT_TRUE(a.r->exchange_once(kNow));
    ASSERT_TRUE(b.r->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 15u) << "Redis's, sooner";
    ASSERT_TRUE(b.x->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 15u) << "etcd's 10 does not take it back";

    // Redis killed: the rounds fail cleanly, counted; the edge counts etcd's
    redis.kill_server();
    ASSERT_TRUE(a.edge.charge(QuotaSubject::kAccount, account, 5, kNow));
    EXPECT_FALSE(a.r->exchange_once(kNow));
    EXPECT_FALSE(b.r->exchange_once(kNow));
    EXPECT_FALSE(b.m.quota_redis_up());
    EXPECT_EQ(b.m.quota_redis_errors(), 1u);
    ASSERT_TRUE(a.x->exchange_once(kNow));
    ASSERT_TRUE(b.x->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 20u) << "etcd's 20, over Redis's last 15";
    EXPECT_FALSE(b.r->exchange_once(kNow));
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 20u) << "never below etcd's";

    // back (empty, as after a crash): everything is published again
    ASSERT_TRUE(redis.restart());
    ASSERT_TRUE(a.edge.charge(QuotaSubject::kAccount, account, 1, kNow));
    ASSERT_TRUE(a.r->exchange_once(kNow));
    ASSERT_TRUE(b.r->exchange_once(kNow));
    EXPECT_TRUE(b.m.quota_redis_up());
    EXPECT_EQ(b.edge.used(QuotaSubject::kAccount, account, kNow), 21u) << "Redis's again";
    EXPECT_EQ(b.m.quota_redis_errors(), 2u);
}

TEST(QuotaRedis, WhatTheStreamHoldsIsNotTrusted) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    RedisServer redis;
    ASSERT_GT(redis.port(), 0);
    TempDir dir;
    Fleet b(etcd, dir.sub("b.usage"), redis.port());
    ASSERT_TRUE(b.x) << b.error;
    const std::string other(24, 'a');
    std::string good, huge, own_id(24, '0');
    syncd::append_quota_record(good, record(QuotaSubject::kKey, 1, kToday, 4));
    syncd::append_quota_record(huge, record(QuotaSubject::kKey, 1, kToday, syncd::kMaxQuotaUnits + 1));
    {
        syncd::QuotaExchange::LedgerView view;
        std::string error;
        ASSERT_TRUE(b.x->attach(view, error)) << error;
        ASSERT_TRUE(view.have_edge_id);
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < KA_USAGE_EDGE_ID_LEN; i++) {
            own_id[2 * i] = digits[view.edge_id[i] >> 4];
            own_id[2 * i + 1] = digits[view.edge_id[i] & 15];
        }
    }
    std::string cmds;
    auto xadd = [&](std::vector<std::string> fields) {
        std::vector<std::string> args{"XADD", "keyauth:quota", "*"};
        args.insert(args.end(), fields.begin(), fields.end());
        cmds += resp(args);
    };
    xadd({"e", other, "q", good});                   // taken: 4
    xadd({"e", other});                              // no batch
    xadd({"e", "AAAAAAAAAAAAAAAAAAAAAAAA", "q", good});  // not lowercase hex
    xadd({"e", other.substr(1), "q", good});         // short id
    xadd({"e", std::string(24, 'b'), "q", good + "x"});  // not whole records
    xadd({"e", std::string(24, 'c'), "q", huge});    // one record over 2^48 - 1
    xadd({"e", own_id, "q", good});                  // this edge's own: not the others'
    xadd({"x", "y"});
    ASSERT_NE(redis.raw(cmds), "");
    ASSERT_TRUE(b.r->exchange_once(kNow));
    EXPECT_EQ(b.m.quota_redis_skipped(), 6u);
    EXPECT_EQ(b.edge.used(QuotaSubject::kKey, id_of(1), kNow), 4u) << "the one good record";

    // a key of another type: the round fails, counted; nothing else changes
    redis.raw(resp({"DEL", "keyauth:quota"}) + resp({"SET", "keyauth:quota", "x"}));
    EXPECT_FALSE(b.r->exchange_once(kNow));
    EXPECT_EQ(b.m.quota_redis_errors(), 1u);
    EXPECT_EQ(b.edge.used(QuotaSubject::kKey, id_of(1), kNow), 4u);
}

// A "Redis" that answers every command with an array of two billion
// elements: refused before anything is allocated for it.
TEST(QuotaRedis, AGarbageAnswerIsRefusedWithinItsBounds) {
    TempDir dir;
    Edge e(dir.sub("e.usage"));
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    syncd::Metrics m;
    std::string error;
    auto x = syncd::QuotaExchange::make(exchange_options(etcd, e.usage_db), m, error);
    ASSERT_TRUE(x) << error;

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(lfd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr *>(&a), &len), 0);
    std::atomic<bool> done{false};
    std::thread liar([&] {
        while (!done) {
            int fd = accept(lfd, nullptr, nullptr);
            if (fd < 0) return;
            char buf[4096];
            while (read(fd, buf, sizeof buf) > 0) {
                const std::string lie = "*2000000000\r\n";
                if (write(fd, lie.data(), lie.size()) < 0) break;
            }
            close(fd);
        }
    });
    syncd::QuotaRedis r(redis_options(ntohs(a.sin_port)), *x, m);
    EXPECT_FALSE(r.exchange_once(kNow));
    EXPECT_EQ(m.quota_redis_errors(), 1u);
    EXPECT_FALSE(r.exchange_once(kNow));
    EXPECT_EQ(m.quota_redis_errors(), 2u);
    done = true;
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    liar.join();
}

// A Redis with a password: the right one is sent with AUTH; a wrong one
// fails the round, and the log says so without the password.
TEST(QuotaRedis, PasswordIsSentNeverLogged) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    RedisServer redis({"--requirepass", "s3cret-pass"});
    ASSERT_GT(redis.port(), 0);
    TempDir dir;
    Edge e(dir.sub("e.usage"));
    syncd::Metrics m;
    std::string error;
    auto x = syncd::QuotaExchange::make(exchange_options(etcd, e.usage_db), m, error);
    ASSERT_TRUE(x) << error;
    auto options = redis_options(redis.port());
    options.password = "wrong-pass";
    syncd::QuotaRedis wrong(options, *x, m);
    ::testing::internal::CaptureStderr();
    EXPECT_FALSE(wrong.exchange_once(kNow));
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(log.find("quota redis failed"), std::string::npos) << log;
    EXPECT_EQ(log.find("wrong-pass"), std::string::npos) << log;
    EXPECT_EQ(m.quota_redis_errors(), 1u);

    options.password = "s3cret-pass";
    syncd::QuotaRedis right(options, *x, m);
    ASSERT_TRUE(e.charge(QuotaSubject::kKey, id_of(1), 2, kNow));
    EXPECT_TRUE(right.exchange_once(kNow));
    EXPECT_EQ(m.quota_redis_published(), 1u);
}
