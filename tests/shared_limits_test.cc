// keyauth_shared_limits' core: spent counts in the rate table, the spent
// batch codec, and the exchange against a real redis-server.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gcra.h"
#include "rate_table.h"
#include "rate_table_memory.h"
#include "redis_server.h"
#include "shared_exchange.h"
#include "spent_batch.h"

using namespace keyauth;
using keyauth::testing::RedisServer;

namespace {

constexpr uint64_t kNow = 5'000 * kNanosPerSecond;

struct Table : keyauth::testing::RateTableMemory {
    explicit Table(size_t slots = 64) : RateTableMemory(slots) {}
    RateCheck check(const unsigned char *id, uint32_t rate, bool share, uint64_t now = kNow) {
        return table->check(id, GcraParams::per_minute(rate), now, lock, share);
    }
    int admitted(const unsigned char *id, uint32_t rate, int tries, bool share,
                 uint64_t now = kNow) {
        int n = 0;
        for (int i = 0; i < tries; i++) n += check(id, rate, share, now).decision.allowed;
        return n;
    }
    struct Spent {
        std::string id;
        uint32_t spent, rate;
    };
    std::vector<Spent> drain() {
        std::vector<Spent> out;
        table->drain(
            [](void *d, const unsigned char id[KA_ID_LEN], uint32_t spent, uint32_t rate) {
                static_cast<std::vector<Spent> *>(d)->push_back(
                    {std::string(reinterpret_cast<const char *>(id), KA_ID_LEN), spent, rate});
            },
            &out);
        return out;
    }
};

const unsigned char kKeyA[KA_ID_LEN] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
const unsigned char kKeyB[KA_ID_LEN] = {9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 5, 6};

std::string id_of(const unsigned char *id) {
    return std::string(reinterpret_cast<const char *>(id), KA_ID_LEN);
}

}  // namespace

TEST(SharedRateTable, CountsAdmittedRequestsOnlyWhenSharing) {
    Table t;
    EXPECT_EQ(t.admitted(kKeyA, 5, 3, false), 3);
    EXPECT_TRUE(t.drain().empty()) << "nothing counted without sharing";
    EXPECT_EQ(t.admitted(kKeyA, 5, 4, true), 2);  // 2 left of the burst of 5
    auto spent = t.drain();
    ASSERT_EQ(spent.size(), 1u);
    EXPECT_EQ(spent[0].id, id_of(kKeyA));
    EXPECT_EQ(spent[0].spent, 2u) << "refused requests are not spent";
    EXPECT_EQ(spent[0].rate, 5u);
    EXPECT_TRUE(t.drain().empty()) << "a count is taken once";
}

// An honest fold: spent requests at rate, within one exchange's bound.
bool fold(Table &t, const unsigned char *id, uint32_t spent, uint32_t rate, uint64_t now = kNow) {
    GcraParams p = GcraParams::per_minute(rate);
    FoldBound b = fold_bound(p, 0);
    return t.table->fold(id, bounded_charge(spent, p, b, nullptr), b.ceiling_ns, now, t.lock);
}

TEST(SharedRateTable, FoldChargesAKeyNeverServedHere) {
    Table t;
    fold(t, kKeyB, 10, 10);
    RateCheck c = t.check(kKeyB, 10, true);
    EXPECT_FALSE(c.decision.allowed) << "another edge spent the whole burst";
    EXPECT_GE(c.decision.retry_after_ns, 5 * kNanosPerSecond);
    EXPECT_TRUE(t.drain().empty()) << "what another edge spent is not published again";
    EXPECT_EQ(t.table->known_rate(kKeyB), 0u) << "a key only folded has no rate known here";
}

TEST(SharedRateTable, FoldTakesFromTheBurst) {
    Table t;
    EXPECT_EQ(t.admitted(kKeyA, 60, 10, true), 10);
    EXPECT_EQ(t.table->known_rate(kKeyA), 60u) << "the rate this edge admitted the key at";
    fold(t, kKeyA, 30, 60);
    RateCheck c = t.check(kKeyA, 60, true);
    ASSERT_TRUE(c.decision.allowed);
    EXPECT_EQ(c.decision.remaining, 60u - 10 - 30 - 1);
    EXPECT_EQ(t.admitted(kKeyA, 60, 100, true), 60 - 10 - 30 - 1);
    auto spent = t.drain();
    ASSERT_EQ(spent.size(), 1u);
    EXPECT_EQ(spent[0].spent, 60u - 30) << "only this edge's own admissions";
}

TEST(SharedFoldBound, OneBurstPlusTheRefillSinceTheLastExchange) {
    for (uint32_t rate : {1u, 7u, 60u, 600u, 100000u, UINT32_MAX}) {
        GcraParams p = GcraParams::per_minute(rate);
        const uint64_t burst_ns = p.tolerance_ns + p.interval_ns;  // b*T
        EXPECT_LE(burst_ns, 60 * kNanosPerSecond) << rate;
        EXPECT_GT(burst_ns, 55 * kNanosPerSecond) << rate;  // 60 s, rounded down per request
        FoldBound b = fold_bound(p, 250'000'000);
        EXPECT_EQ(b.allowance_ns, burst_ns + 250'000'000) << rate;
        EXPECT_EQ(b.ceiling_ns, 2 * burst_ns) << rate;
        EXPECT_EQ(fold_bound(p, 3600 * kNanosPerSecond).allowance_ns, 2 * burst_ns)
            << "the refill is a burst's at most";
        bool capped = true;
        EXPECT_EQ(bounded_charge(1, p, b, &capped), p.interval_ns);
        EXPECT_FALSE(capped);
        EXPECT_EQ(bounded_charge(UINT64_MAX / 2, p, b, &capped), b.allowance_ns);
        EXPECT_TRUE(capped);
        const uint64_t most = b.allowance_ns / p.interval_ns;
        EXPECT_EQ(bounded_charge(most, p, b, &capped), most * p.interval_ns);
        EXPECT_FALSE(capped) << "exactly what the fleet could have spent is charged in full";
        EXPECT_EQ(bounded_charge(most + 1, p, b, &capped), b.allowance_ns);
        EXPECT_TRUE(capped);
    }
}

TEST(SharedRateTable, FoldNeverLeavesAKeyMoreThanTwoBurstsInDebt) {
    Table t;
    GcraParams p = GcraParams::per_minute(600);
    FoldBound b = fold_bound(p, kNanosPerSecond);
    for (int i = 0; i < 2000; i++) {
        EXPECT_TRUE(t.table->fold(kKeyA, b.allowance_ns, b.ceiling_ns, kNow, t.lock));
    }
    RateCheck c = t.check(kKeyA, 600, true);
    EXPECT_FALSE(c.decision.allowed);
    EXPECT_EQ(c.decision.reset_ns, b.ceiling_ns) << "two bursts ahead, not a day";
    EXPECT_EQ(c.decision.retry_after_ns, b.ceiling_ns - p.tolerance_ns);
}

TEST(SharedRateTable, FoldNeverTakesALiveStateOfAnotherKey) {
    Table t(RateTable::kProbe);  // every key shares one probe window
    for (uint64_t i = 1; i <= RateTable::kProbe; i++) {
        unsigned char id[KA_ID_LEN];
        std::memset(id, static_cast<int>(i), sizeof id);
        ASSERT_TRUE(t.check(id, 60, false).decision.allowed);  // live for a second
    }
    EXPECT_FALSE(fold(t, kKeyA, 5, 60))
        << "another edge's key does not push out one this edge is limiting";
    EXPECT_TRUE(fold(t, kKeyA, 5, 60, kNow + 2 * kNanosPerSecond)) << "an idle state is taken";
}

TEST(SharedRateTable, AnEvictedKeyTakesItsCountAlong) {
    Table t(RateTable::kProbe);  // every key shares one probe window
    EXPECT_EQ(t.admitted(kKeyA, 100000, 1, true), 1);
    // fill the window with states newer than A's, which is then reused
    for (uint64_t i = 1; i <= RateTable::kProbe; i++) {
        unsigned char id[KA_ID_LEN];
        std::memset(id, static_cast<int>(i), sizeof id);
        t.check(id, 100000, true, kNow + i);
    }
    for (const auto &s : t.drain()) EXPECT_NE(s.id, id_of(kKeyA));
}

TEST(SpentBatch, RoundTrip) {
    std::string b;
    SpentEntry a{}, z{};
    std::memcpy(a.id, kKeyA, KA_ID_LEN);
    a.spent = 7;
    a.rate_per_minute = 600;
    std::memcpy(z.id, kKeyB, KA_ID_LEN);
    z.spent = UINT32_MAX;
    z.rate_per_minute = 1;
    append_spent(b, a);
    append_spent(b, z);
    EXPECT_EQ(b.size(), 1 + 2 * kSpentEntryBytes);
    std::vector<SpentEntry> got;
    ASSERT_TRUE(read_spent_batch(b, [&](const SpentEntry &e) { got.push_back(e); }));
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(0, std::memcmp(got[0].id, kKeyA, KA_ID_LEN));
    EXPECT_EQ(got[0].spent, 7u);
    EXPECT_EQ(got[0].rate_per_minute, 600u);
    EXPECT_EQ(got[1].spent, UINT32_MAX);
    EXPECT_EQ(got[1].rate_per_minute, 1u);
}

TEST(SpentBatch, RefusesWhatItDoesNotKnow) {
    std::string good;
    SpentEntry e{};
    std::memcpy(e.id, kKeyA, KA_ID_LEN);
    e.spent = 1;
    e.rate_per_minute = 1;
    append_spent(good, e);
    auto refused = [](const std::string &b) {
        int visits = 0;
        bool ok = read_spent_batch(b, [&](const SpentEntry &) { visits++; });
        return !ok && visits == 0;
    };
    EXPECT_TRUE(refused(""));
    EXPECT_TRUE(refused(std::string(1, '\x01')));
    std::string v2 = good;
    v2[0] = 2;
    EXPECT_TRUE(refused(v2)) << "an unknown version";
    EXPECT_TRUE(refused(good.substr(0, good.size() - 1))) << "torn";
    EXPECT_TRUE(refused(good + "x")) << "torn";
    std::string zero = good;
    std::memset(&zero[1 + KA_ID_LEN], 0, 4);
    EXPECT_TRUE(refused(zero)) << "zero spent";
    std::string norate = good;
    std::memset(&norate[1 + KA_ID_LEN + 4], 0, 4);
    EXPECT_TRUE(refused(good + norate.substr(1))) << "a zero rate anywhere refuses the batch";
    std::string many;
    for (size_t i = 0; i <= kSpentBatchMaxKeys; i++) append_spent(many, e);
    EXPECT_TRUE(refused(many)) << "more keys than one entry holds";
}

namespace {

SharedExchange make_exchange(uint64_t edge, const std::string &password = "") {
    SharedSettings s;
    s.edge_id = edge;
    s.password = password;
    return SharedExchange(s);
}

struct Edge {
    explicit Edge(const RedisServer &redis, uint64_t id, const std::string &password = "")
        : x(make_settings(id, password)), fd(redis.connect_fd()) {}
    ~Edge() {
        if (fd >= 0) close(fd);
    }
    static SharedSettings make_settings(uint64_t id, const std::string &password) {
        SharedSettings s;
        s.edge_id = id;
        s.password = password;
        return s;
    }
    bool run(ExchangeResult &out, std::string &err, uint64_t now = kNow) {
        return keyauth::testing::exchange(fd, x, *t.table, now, t.lock, out, err);
    }
    ExchangeResult run(uint64_t now = kNow) {
        ExchangeResult out;
        std::string err;
        EXPECT_TRUE(run(out, err, now)) << err;
        return out;
    }
    Table t;
    SharedExchange x;
    int fd;
};

}  // namespace

TEST(SharedExchange, EdgesChargeWhatOthersSpent) {
    RedisServer redis;
    Edge a(redis, 0xa), b(redis, 0xb);
    ASSERT_GE(a.fd, 0);
    ASSERT_GE(b.fd, 0);
    EXPECT_EQ(b.run().folded, 0u);  // where b starts reading: the stream is empty
    EXPECT_EQ(b.x.last_id(), "0-0");

    EXPECT_EQ(a.t.admitted(kKeyA, 60, 25, true), 25);
    ExchangeResult ra = a.run();
    EXPECT_EQ(ra.published, 1u);

    ExchangeResult rb = b.run();
    EXPECT_EQ(rb.entries, 1u);
    EXPECT_EQ(rb.folded, 1u);
    RateCheck c = b.t.check(kKeyA, 60, true);
    ASSERT_TRUE(c.decision.allowed);
    EXPECT_EQ(c.decision.remaining, 60u - 25 - 1) << "b never served the key";
    EXPECT_EQ(b.run().published, 1u);

    // a reads its own entry and b's, charging only b's
    ExchangeResult again = a.run();
    EXPECT_EQ(again.entries, 2u);
    EXPECT_EQ(again.folded, 1u);
    EXPECT_EQ(a.t.check(kKeyA, 60, true).decision.remaining, 60u - 25 - 1 - 1);
    EXPECT_EQ(redis.raw("*2\r\n$3\r\nTTL\r\n$13\r\nkeyauth:spent\r\n").substr(0, 1), ":");
}

TEST(SharedExchange, ANewConnectionStartsAtTheNewestEntry) {
    RedisServer redis;
    Edge a(redis, 0xa), b(redis, 0xb);
    b.run();
    EXPECT_EQ(a.t.admitted(kKeyA, 60, 10, true), 10);
    a.run();
    a.run();  // a knows where the stream is now
    b.x.reset();  // b lost its connection meanwhile
    ExchangeResult r = b.run();
    EXPECT_EQ(r.folded, 0u) << "what was spent while b was away is not charged to b";
    EXPECT_EQ(a.t.admitted(kKeyA, 60, 5, true), 5);
    a.run();
    EXPECT_EQ(b.run().folded, 1u) << "but what is spent after it is";
}

TEST(SharedExchange, ManyKeysGoOutInEntriesOfBoundedSize) {
    RedisServer redis;
    Edge a(redis, 0xa), b(redis, 0xb);
    b.run();
    Table big(1 << 16);
    for (uint32_t i = 0; i < 2500; i++) {
        unsigned char id[KA_ID_LEN] = {0};
        std::memcpy(id, &i, sizeof i);
        id[6] = static_cast<unsigned char>(i * 7);
        id[8] = static_cast<unsigned char>(i >> 3);
        big.check(id, 600, true);
    }
    ExchangeResult out;
    std::string err;
    ASSERT_TRUE(keyauth::testing::exchange(a.fd, a.x, *big.table, kNow, big.lock, out, err)) << err;
    size_t published = out.published;
    EXPECT_EQ(published, 2500u);
    ExchangeResult rb = b.run();
    EXPECT_EQ(rb.entries, (published + kSpentBatchMaxKeys - 1) / kSpentBatchMaxKeys);
    // b's zone holds 64 keys: once they are all live, the others are not
    // charged there, and none of b's live states is pushed out for them
    EXPECT_EQ(rb.folded, 64u);
    EXPECT_EQ(rb.unplaced, published - 64);
}

TEST(SharedExchange, AuthAndRefusals) {
    RedisServer redis({"--requirepass", "s3cret-pass"});
    {
        Edge a(redis, 0xa);
        ExchangeResult out;
        std::string err;
        EXPECT_FALSE(a.run(out, err));
        EXPECT_NE(err.find("NOAUTH"), std::string::npos) << err;
    }
    {
        Edge a(redis, 0xa, "wrong-pass");
        ExchangeResult out;
        std::string err;
        EXPECT_FALSE(a.run(out, err));
        EXPECT_NE(err.find("AUTH was refused"), std::string::npos) << err;
        EXPECT_EQ(err.find("wrong-pass"), std::string::npos) << "never the password: " << err;
    }
    Edge a(redis, 0xa, "s3cret-pass");
    a.run();
    EXPECT_EQ(a.t.admitted(kKeyA, 60, 3, true), 3);
    EXPECT_EQ(a.run().published, 1u);
    EXPECT_EQ(a.x.request().find("s3cret-pass"), std::string::npos) << "AUTH once a connection";
}

TEST(SharedExchange, ARedisErrorIsAnError) {
    RedisServer redis({"--requirepass", "pw"});
    // the stream's name taken by a string
    std::string set = "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*3\r\n$3\r\nSET\r\n$13\r\nkeyauth:spent\r\n$1\r\nx\r\n";
    ASSERT_NE(redis.raw(set).find("+OK\r\n+OK"), std::string::npos);
    Edge a(redis, 0xa, "pw");
    ExchangeResult out;
    std::string err;
    EXPECT_FALSE(a.run(out, err));
    EXPECT_NE(err.find("WRONGTYPE"), std::string::npos) << err;
}

TEST(SharedExchange, WhatIsNotRedisIsRefused) {
    Table t;
    auto refused = [&](const std::string &bytes) {
        SharedExchange x = make_exchange(1);
        x.begin(*t.table);  // XREVRANGE only: one reply expected
        std::string err;
        SharedExchange::Feed f = x.feed(bytes.data(), bytes.size(), err);
        if (f == SharedExchange::Feed::kError) return !err.empty() && err.find("memory") == std::string::npos;
        if (f == SharedExchange::Feed::kMore) return false;
        ExchangeResult out;
        return !x.finish(*t.table, kNow, t.lock, out, err) && !err.empty();
    };
    EXPECT_TRUE(refused("HTTP/1.1 400 Bad Request\r\n\r\n"));
    EXPECT_TRUE(refused("*0\r\n*0\r\n")) << "more answers than questions";
    EXPECT_TRUE(refused("*4097\r\n")) << "an array longer than an answer holds";
    std::string many = "*1\r\n*4096\r\n";
    for (int i = 0; i < 4096; i++) {
        many += "*16\r\n";
        for (int j = 0; j < 16; j++) many += "+\r\n";
    }
    EXPECT_TRUE(refused(many)) << "more small objects than an answer holds (65,536)";
    EXPECT_TRUE(refused(":1\r\n")) << "an integer for XREVRANGE";
    EXPECT_TRUE(refused("*1\r\n*2\r\n$3\r\nabc\r\n*0\r\n")) << "an entry id that is not one";
    EXPECT_TRUE(refused("-ERR nope\r\n"));
    SharedExchange x = make_exchange(1);
    x.begin(*t.table);
    std::string err;
    std::string huge = "$" + std::to_string(SharedExchange::kMaxReplyBytes + 10) + "\r\n";
    EXPECT_EQ(x.feed(huge.data(), huge.size(), err), SharedExchange::Feed::kMore);
    std::string chunk(1 << 20, 'a');
    SharedExchange::Feed f = SharedExchange::Feed::kMore;
    for (int i = 0; i < 20 && f == SharedExchange::Feed::kMore; i++) {
        f = x.feed(chunk.data(), chunk.size(), err);
    }
    EXPECT_EQ(f, SharedExchange::Feed::kError) << "an answer past the bound";
}

namespace {

// A RESP command of binary-safe arguments.
std::string resp(const std::vector<std::string> &args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const std::string &a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return out;
}

// A batch naming id `times` times, each with count spent at rate.
std::string batch_of(const unsigned char *id, uint32_t spent, uint32_t rate, size_t times) {
    std::string b;
    SpentEntry e{};
    std::memcpy(e.id, id, KA_ID_LEN);
    e.spent = spent;
    e.rate_per_minute = rate;
    for (size_t i = 0; i < times; i++) append_spent(b, e);
    return b;
}

constexpr uint64_t kInterval = 250'000'000;

}  // namespace

// Whoever can write the stream (a buggy edge, the ACL user's holder) writes
// well-formed entries: huge counts, a rate of 1 (each request a minute) or
// of 2^32-1, the same key a thousand times per entry, 127 entries at once
// under forged edge ids. One exchange charges the key at most a burst plus
// the refill since the previous exchange, at the rate this edge admits it
// at; no number of exchanges leaves it more than two bursts in debt.
TEST(SharedExchange, AHostileStreamChargesAKeyNoMoreThanTheBound) {
    RedisServer redis;
    Edge b(redis, 0xb);
    b.run(kNow);
    EXPECT_EQ(b.t.admitted(kKeyA, 600, 1, true), 1);  // b serves A at 600/min
    b.run(kNow);                                       // published its one request

    std::string hostile;
    for (int i = 0; i < 127; i++) {
        char tag[17];
        std::snprintf(tag, sizeof tag, "%016x", 0xbad0 + i);
        uint32_t rate = i % 3 == 0 ? 1 : i % 3 == 1 ? UINT32_MAX : 600;
        hostile += resp({"XADD", "keyauth:spent", "*", "e", tag, "s",
                         batch_of(kKeyA, UINT32_MAX, rate, kSpentBatchMaxKeys)});
    }
    ASSERT_EQ(redis.raw(hostile).substr(0, 1), "$");

    const GcraParams p = GcraParams::per_minute(600);
    const uint64_t burst_ns = p.tolerance_ns + p.interval_ns;  // b*T: 60 s
    uint64_t now = kNow + kInterval;
    ExchangeResult r = b.run(now);
    EXPECT_EQ(r.entries, 127u);
    EXPECT_EQ(r.folded, 1u) << "one charge per key and exchange, however many entries";
    EXPECT_EQ(r.capped, 1u);
    RateCheck c = b.t.check(kKeyA, 600, false, now);
    EXPECT_FALSE(c.decision.allowed);
    EXPECT_EQ(c.decision.reset_ns, burst_ns + kInterval)
        << "a burst plus the refill of the 250 ms since the previous exchange";

    // another key, unknown here, whose entries say it has a rate of 1: the
    // bound is in the key's time (a burst, 60 s, whatever the rate)
    ASSERT_EQ(redis.raw(resp({"XADD", "keyauth:spent", "*", "e", "00000000000bad00", "s",
                              batch_of(kKeyB, UINT32_MAX, 1, 1)}))
                  .substr(0, 1),
              "$");
    now += kInterval;
    r = b.run(now);
    EXPECT_EQ(r.folded, 1u);
    EXPECT_EQ(r.capped, 1u);
    c = b.t.check(kKeyB, 600, false, now);
    EXPECT_FALSE(c.decision.allowed);
    const GcraParams one = GcraParams::per_minute(1);
    EXPECT_EQ(c.decision.reset_ns, one.tolerance_ns + one.interval_ns + kInterval);

    // entries at every exchange: never more than two bursts ahead
    for (int i = 0; i < 6; i++) {
        ASSERT_EQ(redis.raw(resp({"XADD", "keyauth:spent", "*", "e", "00000000000bad00", "s",
                                  batch_of(kKeyA, UINT32_MAX, 1, 1)}))
                      .substr(0, 1),
                  "$");
        now += kInterval;
        b.run(now);
        c = b.t.check(kKeyA, 600, false, now);
        ASSERT_LE(c.decision.reset_ns, 2 * burst_ns) << i;
        ASSERT_LE(c.decision.retry_after_ns, burst_ns + p.interval_ns) << i;
    }
    EXPECT_EQ(c.decision.reset_ns, 2 * burst_ns);
    // and once the entries stop, the key is back within a burst
    now += c.decision.retry_after_ns;
    b.run(now);
    EXPECT_TRUE(b.t.check(kKeyA, 600, false, now).decision.allowed);
}

// Honest edges still charge each other in full: what one other edge admits
// between two exchanges, up to its burst and refill, is charged whole.
TEST(SharedExchange, HonestSpendingIsChargedInFull) {
    RedisServer redis;
    Edge a(redis, 0xa), b(redis, 0xb);
    b.run(kNow);
    EXPECT_EQ(a.t.admitted(kKeyA, 600, 700, true), 600);  // a's whole burst
    a.run(kNow);
    ExchangeResult r = b.run(kNow + kInterval);
    EXPECT_EQ(r.folded, 1u);
    EXPECT_EQ(r.capped, 0u);
    RateCheck c = b.t.check(kKeyA, 600, true, kNow + kInterval);
    EXPECT_FALSE(c.decision.allowed) << "b never served A; a spent its burst";
    EXPECT_EQ(c.decision.reset_ns, 600 * GcraParams::per_minute(600).interval_ns)
        << "as if a's 600 had been admitted at b when b heard of them";
}

// Redis's clock behind the ids an edge has read (a failover to a host whose
// clock is behind, or an entry with an id in the future, then the stream
// lost): a read from the last id finds nothing, ever. The edge sees its own
// entry get a lower id, says so (resynced) and reads on after that entry.
TEST(SharedExchange, IdsGoingBackwardsAreDetectedAndSharingResumes) {
    RedisServer redis;
    Edge a(redis, 0xa), b(redis, 0xb);
    a.run();
    b.run();
    // an entry an hour ahead of Redis's clock: every edge reads past it
    std::string future = std::to_string((static_cast<uint64_t>(time(nullptr)) + 3600) * 1000) + "-0";
    ASSERT_EQ(redis.raw(resp({"XADD", "keyauth:spent", future, "e", "00000000000000ff", "s",
                              batch_of(kKeyB, 1, 600, 1)}))
                  .substr(0, 1),
              "$");
    EXPECT_EQ(a.run().folded, 1u);
    EXPECT_EQ(b.run().folded, 1u);
    EXPECT_EQ(b.x.last_id(), future);
    // the stream is lost (expired, or a failover): new ids are now-ish
    ASSERT_EQ(redis.raw(resp({"DEL", "keyauth:spent"})), ":1\r\n");

    EXPECT_EQ(a.t.admitted(kKeyA, 600, 5, true), 5);
    ExchangeResult r = a.run();
    EXPECT_TRUE(r.resynced) << "a's own entry got an id below the last one read";
    EXPECT_NE(r.resync_detail.find(future), std::string::npos) << r.resync_detail;
    EXPECT_EQ(r.published, 1u);
    EXPECT_FALSE(a.run().resynced) << "once";

    // b publishes nothing, so it cannot tell at once; after a quiet while
    // it asks for the newest id, and that tells
    EXPECT_FALSE(b.run(kNow).resynced);
    EXPECT_FALSE(b.run(kNow + SharedExchange::kQuietProbeNs).resynced);  // asks next time
    r = b.run(kNow + SharedExchange::kQuietProbeNs + kInterval);
    EXPECT_TRUE(r.resynced);
    EXPECT_NE(r.resync_detail.find(future), std::string::npos) << r.resync_detail;
    EXPECT_FALSE(b.run(kNow + SharedExchange::kQuietProbeNs + 2 * kInterval).resynced);

    // sharing works again, both ways
    EXPECT_EQ(a.t.admitted(kKeyA, 600, 7, true), 7);
    a.run();
    const uint64_t later = kNow + SharedExchange::kQuietProbeNs + 3 * kInterval;
    r = b.run(later);
    EXPECT_FALSE(r.resynced);
    EXPECT_EQ(r.folded, 1u) << "b charges what a spent after the resync";
    EXPECT_EQ(b.t.check(kKeyA, 600, false, later).decision.remaining, 600u - 7 - 1);
    EXPECT_EQ(b.t.admitted(kKeyB, 600, 2, true, later), 2);
    EXPECT_FALSE(b.run(later).resynced);
    EXPECT_EQ(a.run().folded, 1u) << "and a charges what b spent";
}
