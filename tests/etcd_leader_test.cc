// Leases through the client, and the election of etcd_leader.h, against one
// real 3-member etcd cluster on loopback (tests/etcd_cluster.h) shared by
// the suite, each test under its own key. TTLs are etcd's minimum (2 s) to
// keep the suite short; every wait is on a condition with a deadline, and
// the timings asserted are the safety bounds of the header (nobody acquires
// before the previous holder's fence) and generous liveness bounds.
#include "etcd_leader.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "etcd_cluster.h"
#include "etcd_status_asserts.h"

using namespace keyauth::etcd;
using keyauth::testing::EtcdCluster;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

template <typename Condition>
bool wait_for(Condition done, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!done()) {
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

class EtcdLeaderTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { etcd_ = new EtcdCluster(3); }
    static void TearDownTestSuite() {
        delete etcd_;
        etcd_ = nullptr;
    }
    void SetUp() override { ASSERT_TRUE(etcd_->ok()) << etcd_->error(); }

    static std::string key() {
        return std::string("/leader-test/") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    }

    static std::unique_ptr<Client> client(std::vector<std::string> endpoints = {}) {
        ClientOptions o;
        o.endpoints = endpoints.empty() ? etcd_->endpoint_list() : std::move(endpoints);
        std::string error;
        auto c = Client::make(o, error);
        EXPECT_NE(c, nullptr) << error;
        return c;
    }

    static std::unique_ptr<EtcdLeader> leader(const std::string &identity, std::chrono::seconds ttl = 2s,
                                              std::vector<std::string> endpoints = {}) {
        LeaderOptions o;
        o.client.endpoints = endpoints.empty() ? etcd_->endpoint_list() : std::move(endpoints);
        o.key = key();
        o.identity = identity;
        o.ttl = ttl;
        std::string error;
        auto l = EtcdLeader::make(o, error);
        EXPECT_NE(l, nullptr) << error;
        return l;
    }

    // What the key holds, read by a client of its own.
    static KeyValue stored() {
        RangeRequest r;
        r.key = key();
        RangeResponse out;
        Status s = client()->range(r, out);
        EXPECT_TRUE(s.ok()) << s.message;
        return out.kvs.empty() ? KeyValue{} : out.kvs.front();
    }

    // The index of a member that is not the raft leader.
    static int a_follower() {
        for (int i = 0; i < etcd_->size(); ++i) {
            StatusResponse s;
            if (client({etcd_->endpoint(i)})->status(s).ok() && s.leader != s.header.member_id) return i;
        }
        return -1;
    }

    static EtcdCluster *etcd_;
};

EtcdCluster *EtcdLeaderTest::etcd_ = nullptr;

// ---- the client's lease calls -------------------------------------------

TEST_F(EtcdLeaderTest, LeaseGrantKeepAliveRevokeAndAPutAttachedToIt) {
    auto c = client();
    LeaseGrantResponse g;
    ASSERT_OK(c->lease_grant({2, 0}, g));
    EXPECT_NE(g.id, 0);
    EXPECT_EQ(g.ttl_seconds, 2);

    PutResponse p;
    ASSERT_OK(c->put({key(), "v", g.id}, p));
    EXPECT_EQ(stored().lease, g.id);

    // keep-alive: one answer, the stream closed by etcd, several times in a row
    // on the same connections
    for (int i = 0; i < 3; ++i) {
        LeaseKeepAliveResponse k;
        auto t0 = Clock::now();
        ASSERT_OK(c->lease_keepalive(g.id, k));
        EXPECT_LT(seconds(Clock::now() - t0), 1.0) << "the call does not wait for the stream";
        EXPECT_EQ(k.id, g.id);
        EXPECT_EQ(k.ttl_seconds, 2);
    }

    LeaseRevokeResponse r;
    ASSERT_OK(c->lease_revoke(g.id, r));
    EXPECT_EQ(stored().key, "") << "revoking the lease deleted its key";
    LeaseKeepAliveResponse gone;
    ASSERT_OK(c->lease_keepalive(g.id, gone));
    EXPECT_EQ(gone.ttl_seconds, 0) << "TTL 0: the lease is gone";
    EXPECT_EQ(c->lease_revoke(g.id, r).code, Errc::kLeaseNotFound);
    EXPECT_EQ(c->put({key(), "v", g.id}, p).code, Errc::kLeaseNotFound);
    TxnRequest t;
    t.success.emplace_back(PutRequest{key(), "v", g.id});
    TxnResponse out;
    EXPECT_EQ(c->txn(t, out).code, Errc::kLeaseNotFound) << "a txn's put as well";
}

TEST_F(EtcdLeaderTest, LeaseExpiresWithoutKeepAlive) {
    auto c = client();
    LeaseGrantResponse g;
    ASSERT_OK(c->lease_grant({2, 0}, g));
    PutResponse p;
    ASSERT_OK(c->put({key(), "v", g.id}, p));
    auto t0 = Clock::now();
    ASSERT_TRUE(wait_for([&] { return stored().key.empty(); }, 6s)) << "the key outlived its lease";
    EXPECT_GE(seconds(Clock::now() - t0), 1.0);  // not at once
}

// ---- EtcdLeader -----------------------------------------------------------

TEST(EtcdLeaderOptions, MakeRefusesUnusableOptionsAndIdentitiesDiffer) {
    LeaderOptions o;
    o.client.endpoints = {"http://127.0.0.1:1"};
    o.key = "/k";
    o.identity = "me";
    std::string error;
    EXPECT_NE(EtcdLeader::make(o, error), nullptr) << error;
    for (auto bad : {+[](LeaderOptions &x) { x.key.clear(); }, +[](LeaderOptions &x) { x.identity.clear(); },
                     +[](LeaderOptions &x) { x.ttl = 0s; }, +[](LeaderOptions &x) { x.margin = 10s; },
                     +[](LeaderOptions &x) { x.client.endpoints.clear(); }}) {
        LeaderOptions b = o;
        bad(b);
        EXPECT_EQ(EtcdLeader::make(b, error), nullptr);
        EXPECT_FALSE(error.empty());
    }
    const std::string a = make_holder_identity(), b = make_holder_identity();
    EXPECT_NE(a, b);
    EXPECT_NE(a.find(":" + std::to_string(getpid()) + ":"), std::string::npos) << a;
}

TEST(EtcdLeaderOptions, UnreachableEtcdNeverLeads) {
    LeaderOptions o;
    o.client.endpoints = {"http://127.0.0.1:1"};
    o.key = "/k";
    o.identity = "me";
    std::string error;
    auto l = EtcdLeader::make(o, error);
    ASSERT_NE(l, nullptr) << error;
    EXPECT_FALSE(l->try_acquire());
    EXPECT_FALSE(l->still_leader());
    EXPECT_EQ(l->last_status().code, Errc::kUnavailable);
    EXPECT_FALSE(l->keep());
    l->resign();  // nothing to revoke
}

TEST_F(EtcdLeaderTest, OneOfThreeContendersLeadsAndTheKeyHoldsItsIdentity) {
    std::vector<std::unique_ptr<EtcdLeader>> contenders;
    for (int i = 0; i < 3; ++i) contenders.push_back(leader(make_holder_identity()));
    bool won[3] = {};
    {
        std::vector<std::thread> threads;  // at the same moment, as edges do
        for (int i = 0; i < 3; ++i) threads.emplace_back([&, i] { won[i] = contenders[i]->try_acquire(); });
        for (auto &t : threads) t.join();
    }
    ASSERT_EQ(won[0] + won[1] + won[2], 1);
    const int w = won[0] ? 0 : won[1] ? 1 : 2;
    const EtcdLeader &winner = *contenders[w];
    EXPECT_TRUE(winner.still_leader());
    EXPECT_EQ(winner.margin(), 400ms) << "TTL / 5";
    EXPECT_GT(winner.remaining(), 1s);
    EXPECT_LE(winner.remaining(), 2s - winner.margin()) << "the fence is the margin before the lease's end";
    const KeyValue kv = stored();
    EXPECT_EQ(kv.value, winner.identity());
    EXPECT_NE(kv.lease, 0);
    EXPECT_EQ(winner.term(), kv.create_revision);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(contenders[i]->holder(), winner.identity()) << i;
        if (i == w) continue;
        EXPECT_FALSE(contenders[i]->still_leader()) << i;
        EXPECT_EQ(contenders[i]->term(), 0);
        EXPECT_FALSE(contenders[i]->try_acquire()) << "a second campaign loses as well";
        EXPECT_FALSE(contenders[i]->keep());
    }
    EXPECT_TRUE(contenders[w]->keep());
    EXPECT_TRUE(contenders[w]->try_acquire()) << "the holder's campaign is a keep";
    EXPECT_EQ(stored().create_revision, kv.create_revision) << "kept, not created again";
    for (auto &c : contenders) c->resign();
    EXPECT_EQ(stored().key, "");
}

TEST_F(EtcdLeaderTest, ResignHandsOverAtOnce) {
    // a long TTL: a takeover well inside it is the resign's, not an expiry's
    const auto ttl = 6s;
    LeaderLoop first(leader("first", ttl));
    ASSERT_TRUE(wait_for([&] { return first.leading(); }, 5s));
    LeaderLoop second(leader("second", ttl));
    ASSERT_TRUE(wait_for([&] { return second.holder() == "first"; }, 5s));
    EXPECT_FALSE(second.leading());

    first.stop(true);
    auto resigned = Clock::now();
    EXPECT_FALSE(first.still_leader());
    EXPECT_FALSE(first.leading());
    ASSERT_TRUE(wait_for([&] { return second.still_leader(); }, 5s));
    const double took = seconds(Clock::now() - resigned);
    std::printf("[  figure  ] takeover after a resign: %.2f s (TTL %lld s)\n", took,
                static_cast<long long>(ttl.count()));
    EXPECT_LT(took, 3.0);
    EXPECT_EQ(second.holder(), "second");
    EXPECT_EQ(stored().value, "second");
}

TEST_F(EtcdLeaderTest, KilledLeaderIsReplacedAfterItsLeaseExpires) {
    const auto ttl = 2s;
    // one keep (a) or campaign (b) every TTL/3, not more
    auto rounds_allowed = [ttl](Clock::time_point since) {
        return static_cast<uint64_t>(seconds(Clock::now() - since) / (seconds(ttl) / 3)) + 2;
    };
    const Clock::time_point a_started = Clock::now();
    auto a = std::make_unique<LeaderLoop>(leader("a", ttl));
    ASSERT_TRUE(wait_for([&] { return a->leading(); }, 5s));
    const Clock::time_point b_started = Clock::now();
    LeaderLoop b(leader("b", ttl));
    ASSERT_TRUE(wait_for([&] { return b.holder() == "a"; }, 5s));

    // killed: no more keep-alives, no resign
    a->stop(false);
    EXPECT_LE(a->rounds(), rounds_allowed(a_started)) << "keeps";
    const Clock::time_point died = Clock::now();
    const Clock::time_point fence = died + a->remaining();  // a stops claiming then
    a.reset();
    ASSERT_TRUE(wait_for([&] { return b.still_leader(); }, 8s)) << b.holder();
    const Clock::time_point took_over = Clock::now();
    std::printf("[  figure  ] takeover after a kill: %.2f s (TTL %lld s)\n", seconds(took_over - died),
                static_cast<long long>(ttl.count()));
    EXPECT_GE(took_over, fence) << "b acquired while a could still claim";
    // the lease's TTL since a's last renewal, etcd's expiry check (0.5 s),
    // b's campaign interval (TTL/3), and a loaded machine's slack
    EXPECT_LT(seconds(took_over - died), seconds(ttl) + 0.5 + 0.7 + 1.5);
    EXPECT_EQ(stored().value, "b");
    EXPECT_LE(b.rounds(), rounds_allowed(b_started)) << "campaigns";
}

TEST_F(EtcdLeaderTest, LeaderCutOffFromEtcdStopsClaimingBeforeItsLeaseExpires) {
    const auto ttl = 2s;
    const int cut = a_follower();  // a raft leader stopped would add an election
    ASSERT_GE(cut, 0);
    std::vector<std::string> others;
    for (int i = 0; i < etcd_->size(); ++i) {
        if (i != cut) others.push_back(etcd_->endpoint(i));
    }
    LeaderLoop a(leader("a", ttl, {etcd_->endpoint(cut)}));
    ASSERT_TRUE(wait_for([&] { return a.leading(); }, 5s));
    LeaderLoop b(leader("b", ttl, others));
    ASSERT_TRUE(wait_for([&] { return b.holder() == "a"; }, 5s));

    etcd_->stop(cut);  // a's only member: alive, silent
    const Clock::time_point cut_at = Clock::now();
    ASSERT_TRUE(wait_for([&] { return !a.still_leader(); }, 4s));
    const Clock::time_point a_stopped = Clock::now();
    ASSERT_TRUE(wait_for([&] { return b.still_leader(); }, 8s)) << b.holder();
    const Clock::time_point b_started = Clock::now();
    etcd_->resume(cut);
    std::printf("[  figure  ] cut off: a stopped claiming after %.2f s, b took over after %.2f s (TTL %lld s)\n",
                seconds(a_stopped - cut_at), seconds(b_started - cut_at), static_cast<long long>(ttl.count()));
    EXPECT_LT(a_stopped - cut_at, ttl - a.leader().margin() + 50ms)
        << "a claimed past its fence (its last renewal + TTL - margin)";
    EXPECT_LT(a_stopped, b_started) << "a and b both claimed";
    EXPECT_FALSE(a.still_leader()) << "a cut off never claims again while b holds";
    EXPECT_EQ(stored().value, "b");
    // a reaches etcd again: it follows b rather than fight
    ASSERT_TRUE(etcd_->wait_healthy(cut, 10s)) << etcd_->error();
    ASSERT_TRUE(wait_for([&] { return a.holder() == "b"; }, 5s)) << a.holder();
    EXPECT_FALSE(a.leading());
}

}  // namespace
