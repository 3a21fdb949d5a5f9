// The etcd client against real etcd members on loopback (tests/etcd_cluster.h;
// no mocks): round trips, a paged snapshot under concurrent writes, txn
// guards, the watch (catch-up, deletes, progress, compaction, cancel), and
// failover (a member killed, stopped, or every member gone). Timings are
// asserted only as generous bounds (a call returns within twice its deadline),
// and every wait is on a condition with a deadline.
#include "etcd_client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "etcd_cluster.h"
#include "etcd_status_asserts.h"

using namespace keyauth::etcd;
using keyauth::testing::EtcdCluster;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Client> connect(const std::vector<std::string> &endpoints,
                                std::chrono::milliseconds timeout = 5s, size_t max_answer = 0) {
    ClientOptions o;
    o.endpoints = endpoints;
    o.request_timeout = timeout;
    if (max_answer != 0) o.max_answer_bytes = max_answer;
    std::string error;
    auto c = Client::make(o, error);
    EXPECT_NE(c, nullptr) << error;
    return c;
}

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

template <typename Condition>
bool wait_for(Condition done, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    while (!done()) {
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

RangeRequest prefix(const std::string &p) {
    RangeRequest r;
    r.key = p;
    r.range_end = prefix_range_end(p);
    return r;
}

RangeRequest one_key(const std::string &k) {
    RangeRequest r;
    r.key = k;
    return r;
}

WatchCreateRequest watch_prefix(const std::string &p, int64_t start_revision) {
    WatchCreateRequest w;
    w.key = p;
    w.range_end = prefix_range_end(p);
    w.start_revision = start_revision;
    w.progress_notify = true;
    return w;
}

// A figure for the report, in the test output.
void figure(const std::string &what) { std::printf("[  figure  ] %s\n", what.c_str()); }

// Puts until it works or `timeout` passes (a cluster electing a leader).
Status put_until_ok(Client &c, const PutRequest &p, std::chrono::milliseconds timeout) {
    auto deadline = Clock::now() + timeout;
    PutResponse out;
    for (;;) {
        Status s = c.put(p, out);
        if (s.ok() || !s.retryable() || Clock::now() >= deadline) return s;
        std::this_thread::sleep_for(100ms);
    }
}

// ---- without etcd -------------------------------------------------------

TEST(EtcdClientOptions, Endpoints) {
    std::vector<std::string> out;
    std::string error;
    ASSERT_TRUE(parse_endpoints("http://127.0.0.1:2379,https://etcd-1.example:2379/,http://[::1]:2379",
                                out, error))
        << error;
    EXPECT_EQ(out, (std::vector<std::string>{"http://127.0.0.1:2379", "https://etcd-1.example:2379",
                                             "http://[::1]:2379"}));
    ASSERT_TRUE(parse_endpoints("http://localhost", out, error)) << error;
    for (const char *bad : {"", ",", "http://a:1,", "127.0.0.1:2379", "ftp://a:1", "http://",
                            "http://:2379", "http://a:1/v3", "http://u@a:1", "http://a:99999",
                            "http://a:", "http://a b:1", "http://a:1?x", "http://[::1", "http://[::1]x",
                            "http://a:1:2"}) {
        EXPECT_FALSE(parse_endpoints(bad, out, error)) << bad;
        EXPECT_FALSE(error.empty());
    }
}

TEST(EtcdClientOptions, MakeRefusesUnusableOptions) {
    std::string error;
    EXPECT_EQ(Client::make(ClientOptions{}, error), nullptr);
    EXPECT_NE(error.find("no etcd endpoint"), std::string::npos);
    ClientOptions bad;
    bad.endpoints = {"http://127.0.0.1:1"};
    bad.request_timeout = 0ms;
    EXPECT_EQ(Client::make(bad, error), nullptr);
    bad.request_timeout = 1s;
    bad.endpoints = {"tcp://127.0.0.1:1"};
    EXPECT_EQ(Client::make(bad, error), nullptr);
    bad.endpoints = {"http://127.0.0.1:1"};
    bad.max_answer_bytes = kMaxAnswerBytes + 1;
    EXPECT_EQ(Client::make(bad, error), nullptr);
}

TEST(EtcdClientOptions, NothingListeningIsUnavailableAtOnce) {
    // a port nobody listens on: refused, not a wait for the deadline
    auto c = connect({"http://127.0.0.1:1", "http://127.0.0.1:2"}, 5s);
    ASSERT_NE(c, nullptr);
    RangeResponse r;
    auto t0 = Clock::now();
    Status s = c->range(one_key("/a"), r);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;
    EXPECT_TRUE(s.retryable());
    EXPECT_LT(seconds_since(t0), 2.0);
    EXPECT_NE(s.message.find("127.0.0.1:1"), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("127.0.0.1:2"), std::string::npos) << s.message;
}

// ---- one member -----------------------------------------------------------

TEST(EtcdClient, PutRangeDeleteRoundTripWithBinaryKeysAndValues) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);

    std::string every_byte;
    for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
    std::mt19937 rng(15);
    std::string big(100000, '\0');
    for (char &ch : big) ch = static_cast<char>(rng() & 0xff);
    std::map<std::string, std::string> want = {
        {std::string("/t/\x00\xff\x01", 6), every_byte},
        {"/t/\n\r\"\\", ""},
        {"/t/" + every_byte, std::string(1, '\0')},
        {"/t/big", big},
    };
    int64_t last = 0;
    for (const auto &[k, v] : want) {
        PutResponse p;
        ASSERT_OK(c->put({k, v}, p));
        EXPECT_GT(p.header.revision, last);
        last = p.header.revision;
    }
    PutResponse outside;
    ASSERT_OK(c->put({"/t0", "not in /t/"}, outside));

    RangeResponse r;
    ASSERT_OK(c->range(prefix("/t/"), r));
    EXPECT_EQ(r.count, 4);
    EXPECT_FALSE(r.more);
    ASSERT_EQ(r.kvs.size(), want.size());
    auto it = want.begin();
    for (const KeyValue &kv : r.kvs) {  // etcd orders by bytes, as std::string does
        EXPECT_EQ(kv.key, it->first);
        EXPECT_EQ(kv.value, it->second);
        EXPECT_EQ(kv.version, 1);
        EXPECT_EQ(kv.create_revision, kv.mod_revision);
        ++it;
    }

    PutResponse again;
    ASSERT_OK(c->put({"/t/big", "small"}, again));
    ASSERT_OK(c->range(one_key("/t/big"), r));
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].value, "small");
    EXPECT_EQ(r.kvs[0].version, 2);
    EXPECT_EQ(r.kvs[0].mod_revision, again.header.revision);
    EXPECT_LT(r.kvs[0].create_revision, r.kvs[0].mod_revision);

    DeleteRangeResponse d;
    ASSERT_OK(c->delete_range({std::string("/t/\x00\xff\x01", 6), ""}, d));
    EXPECT_EQ(d.deleted, 1);
    ASSERT_OK(c->delete_range({"/t/", prefix_range_end("/t/")}, d));
    EXPECT_EQ(d.deleted, 3);
    ASSERT_OK(c->range(prefix("/t/"), r));
    EXPECT_TRUE(r.kvs.empty());
    EXPECT_EQ(r.count, 0);
    ASSERT_OK(c->range(one_key("/t0"), r));
    EXPECT_EQ(r.kvs.size(), 1u);

    StatusResponse st;
    ASSERT_OK(c->status(st));
    EXPECT_NE(st.header.cluster_id, 0u);
    EXPECT_EQ(st.leader, st.header.member_id);  // one member leads itself
    EXPECT_EQ(st.version.substr(0, 4), "3.4.");
    EXPECT_EQ(c->connections_opened(), 1u) << "every call above went over one kept-alive connection";
}

TEST(EtcdClientTls, CertificatesAndCaArePassedToCurl) {
    keyauth::testing::TempDir pki;
    keyauth::testing::EtcdTls tls;
    std::string error;
    ASSERT_TRUE(EtcdCluster::make_test_certs(pki.path(), tls, error)) << error;
    keyauth::testing::EtcdClusterOptions options;
    options.tls = tls;
    EtcdCluster etcd(1, options);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    ASSERT_EQ(etcd.endpoint(0).substr(0, 8), "https://");

    ClientOptions full;
    full.endpoints = etcd.endpoint_list();
    full.request_timeout = 5s;
    full.ca_file = tls.ca_file;
    full.cert_file = tls.client_cert;
    full.key_file = tls.client_key;
    auto c = Client::make(full, error);
    ASSERT_NE(c, nullptr) << error;
    PutResponse p;
    ASSERT_OK(c->put({"/tls/a", "1"}, p));
    RangeResponse r;
    ASSERT_OK(c->range(one_key("/tls/a"), r));
    ASSERT_EQ(r.kvs.size(), 1u);
    WatchOptions wo;
    EXPECT_OK(c->watch(watch_prefix("/tls/", 0), wo, [](const WatchResponse &w) { return !w.created; }));

    ClientOptions no_cert = full;  // the member wants a client certificate
    no_cert.cert_file.clear();
    no_cert.key_file.clear();
    auto anonymous = Client::make(no_cert, error);
    ASSERT_NE(anonymous, nullptr) << error;
    Status s = anonymous->put({"/tls/a", "2"}, p);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;

    ClientOptions no_ca = full;  // the member's certificate cannot be verified
    no_ca.ca_file.clear();
    auto unverified = Client::make(no_ca, error);
    ASSERT_NE(unverified, nullptr) << error;
    s = unverified->put({"/tls/a", "3"}, p);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;
    EXPECT_NE(s.message.find("SSL"), std::string::npos) << s.message;

    ASSERT_OK(c->range(one_key("/tls/a"), r));
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].value, "1");
}

TEST(EtcdClient, TooLargeAnswersAndRefusedRequests) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    auto small = connect(etcd.endpoint_list(), 5s, 1000);
    ASSERT_NE(c, nullptr);
    ASSERT_NE(small, nullptr);
    PutResponse p;
    ASSERT_OK(c->put({"/big", std::string(5000, 'x')}, p));
    RangeResponse r;
    Status s = small->range(one_key("/big"), r);
    EXPECT_EQ(s.code, Errc::kBadAnswer) << s.message;
    EXPECT_NE(s.message.find("over 1000 bytes"), std::string::npos) << s.message;
    ASSERT_OK(small->range(one_key("/nothing"), r));  // the same client carries on

    // etcd's own limits: 128 operations a txn (HTTP 400: not worth a retry)
    TxnRequest t;
    for (int i = 0; i < 129; ++i) t.success.push_back(PutRequest{"/many/" + std::to_string(i), "x"});
    TxnResponse tr;
    s = c->txn(t, tr);
    EXPECT_EQ(s.code, Errc::kRejected) << s.message;
    EXPECT_FALSE(s.retryable());
    EXPECT_NE(s.message.find("too many operations"), std::string::npos) << s.message;
    // a revision from the future is refused too, and is not a compaction
    RangeRequest future = one_key("/big");
    future.revision = 1'000'000;
    s = c->range(future, r);
    EXPECT_EQ(s.code, Errc::kRejected) << s.message;
}

TEST(EtcdClient, PagedRangeIsOneSnapshotWhileWritesContinue) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);
    const int kKeys = 3000;
    auto key = [](int i) {
        char b[32];
        std::snprintf(b, sizeof b, "/p/%05d", i);
        return std::string(b);
    };
    for (int batch = 0; batch < kKeys / 100; ++batch) {
        TxnRequest t;
        for (int i = batch * 100; i < (batch + 1) * 100; ++i) t.success.push_back(PutRequest{key(i), "v0"});
        TxnResponse tr;
        ASSERT_OK(c->txn(t, tr));
        ASSERT_TRUE(tr.succeeded);
    }

    // A writer adds, overwrites and deletes keys in the range all along.
    std::atomic<bool> stop{false};
    std::atomic<int> writes{0};
    std::thread writer([&] {
        auto w = connect(etcd.endpoint_list());
        if (w == nullptr) return;
        for (int i = 0; !stop.load(); ++i) {
            Status s;
            if (i % 3 == 0) {
                PutResponse p;
                s = w->put({"/p/new" + std::to_string(i), "n"}, p);
            } else if (i % 3 == 1) {
                PutResponse p;
                s = w->put({key(i % kKeys), "v" + std::to_string(i)}, p);
            } else {
                DeleteRangeResponse d;
                s = w->delete_range({key((i * 7) % kKeys), ""}, d);
            }
            EXPECT_TRUE(s.ok()) << s.message;
            if (!s.ok()) return;
            ++writes;
        }
    });
    EXPECT_TRUE(wait_for([&] { return writes.load() >= 10; }, 30s));

    std::vector<KeyValue> seen;
    int pages = 0;
    int64_t revision = 0;
    Status s = c->range_all(prefix("/p/"), 250, [&](const RangeResponse &page) {
        ++pages;
        seen.insert(seen.end(), page.kvs.begin(), page.kvs.end());
        // let the writer change things between every two pages
        int before = writes.load();
        EXPECT_TRUE(wait_for([&] { return writes.load() >= before + 3; }, 30s));
        return true;
    }, &revision);
    stop = true;
    writer.join();
    ASSERT_OK(s);
    EXPECT_GE(pages, kKeys / 250);

    // exactly the snapshot: what one read at that revision returns
    RangeRequest at = prefix("/p/");
    at.revision = revision;
    RangeResponse truth;
    ASSERT_OK(c->range(at, truth));
    ASSERT_EQ(seen.size(), truth.kvs.size());
    for (size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].key, truth.kvs[i].key);
        EXPECT_EQ(seen[i].value, truth.kvs[i].value);
        EXPECT_EQ(seen[i].mod_revision, truth.kvs[i].mod_revision);
        EXPECT_LE(seen[i].mod_revision, revision);
    }
    // and the store did move on meanwhile
    RangeResponse now;
    ASSERT_OK(c->range(prefix("/p/"), now));
    EXPECT_GT(now.header.revision, revision + pages);
    figure("paged range: " + std::to_string(seen.size()) + " keys in " + std::to_string(pages) +
           " pages at revision " + std::to_string(revision) + ", " + std::to_string(writes.load()) +
           " writes meanwhile");
}

TEST(EtcdClient, TxnGuards) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);

    TxnRequest create;
    create.compare = {Compare::absent("/g/a")};
    create.success = {PutRequest{"/g/a", "1"}};
    create.failure = {one_key("/g/a")};
    TxnResponse t;
    ASSERT_OK(c->txn(create, t));
    EXPECT_TRUE(t.succeeded);
    ASSERT_EQ(t.responses.size(), 1u);
    EXPECT_TRUE(std::holds_alternative<PutResponse>(t.responses[0]));
    const int64_t created_at = t.header.revision;

    // the key exists now: the guard fails, the failure branch reads it
    ASSERT_OK(c->txn(create, t));
    EXPECT_FALSE(t.succeeded);
    ASSERT_EQ(t.responses.size(), 1u);
    ASSERT_TRUE(std::holds_alternative<RangeResponse>(t.responses[0]));
    const auto &read = std::get<RangeResponse>(t.responses[0]);
    ASSERT_EQ(read.kvs.size(), 1u);
    EXPECT_EQ(read.kvs[0].value, "1");
    EXPECT_EQ(read.kvs[0].mod_revision, created_at);

    TxnRequest update;
    update.compare = {Compare::mod_revision_is("/g/a", created_at)};
    update.success = {PutRequest{"/g/a", "2"}, PutRequest{"/g/b", "2"}};
    ASSERT_OK(c->txn(update, t));
    EXPECT_TRUE(t.succeeded);
    const int64_t updated_at = t.header.revision;
    // the same guard again is stale: nothing happens
    update.success = {PutRequest{"/g/a", "3"}};
    ASSERT_OK(c->txn(update, t));
    EXPECT_FALSE(t.succeeded);
    EXPECT_TRUE(t.responses.empty());
    RangeResponse r;
    ASSERT_OK(c->range(one_key("/g/a"), r));
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].value, "2");
    EXPECT_EQ(r.kvs[0].mod_revision, updated_at);

    // VALUE and VERSION compares, and a delete in the success branch
    TxnRequest del;
    Compare value;
    value.key = "/g/a";
    value.target = CompareTarget::kValue;
    value.value = "2";
    Compare version;
    version.key = "/g/a";
    version.target = CompareTarget::kVersion;
    version.result = CompareResult::kGreater;
    version.number = 1;
    del.compare = {value, version};
    del.success = {DeleteRangeRequest{"/g/", prefix_range_end("/g/")}};
    ASSERT_OK(c->txn(del, t));
    EXPECT_TRUE(t.succeeded);
    ASSERT_EQ(t.responses.size(), 1u);
    EXPECT_EQ(std::get<DeleteRangeResponse>(t.responses[0]).deleted, 2);
}

TEST(EtcdClient, WatchFromAPastRevisionSeesEveryEventInOrderThenProgress) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);

    // 1,500 revisions (catch-up arrives in batches of ~1,000), with deletes
    // in the same txn as a put, lone deletes, and writes outside the prefix.
    struct Expected {
        EventType type;
        std::string key, value;
        int64_t revision;
    };
    std::vector<Expected> want;
    int64_t first = 0;
    for (int i = 0; i < 1500; ++i) {
        std::string k = "/w/" + std::to_string(i), v = "v" + std::to_string(i);
        if (i % 10 == 9) {
            DeleteRangeResponse d;
            ASSERT_OK(c->delete_range({"/w/" + std::to_string(i - 1), ""}, d));
            ASSERT_EQ(d.deleted, 1);
            want.push_back({EventType::kDelete, "/w/" + std::to_string(i - 1), "", d.header.revision});
        } else if (i % 10 == 5) {
            TxnRequest t;
            t.success = {PutRequest{k, v}, DeleteRangeRequest{"/w/" + std::to_string(i - 1), ""},
                         PutRequest{"/elsewhere/" + k, v}};
            TxnResponse tr;
            ASSERT_OK(c->txn(t, tr));
            want.push_back({EventType::kPut, k, v, tr.header.revision});
            want.push_back({EventType::kDelete, "/w/" + std::to_string(i - 1), "", tr.header.revision});
        } else {
            PutResponse p;
            ASSERT_OK(c->put({k, v}, p));
            want.push_back({EventType::kPut, k, v, p.header.revision});
        }
        if (first == 0) first = want.front().revision;
    }

    std::vector<Event> got;
    int progress = 0, lines = 0, created = 0;
    int64_t applied = 0;  // the highest mod_revision seen, as syncd will keep it
    double caught_up_s = 0;
    auto t0 = Clock::now();
    WatchOptions wo;
    wo.silence_timeout = 10s;
    Status s = c->watch(watch_prefix("/w/", first), wo, [&](const WatchResponse &r) {
        ++lines;
        created += r.created;
        for (const Event &e : r.events) {
            EXPECT_GE(e.kv.mod_revision, applied);
            applied = e.kv.mod_revision;
            got.push_back(e);
        }
        if (!r.events.empty() && got.size() >= want.size()) caught_up_s = seconds_since(t0);
        if (r.is_progress_notify() && got.size() >= want.size()) {
            ++progress;
            EXPECT_GE(r.header.revision, applied);
        }
        return progress < 2 && seconds_since(t0) < 120;
    });
    EXPECT_OK(s);
    EXPECT_EQ(created, 1);
    EXPECT_EQ(progress, 2) << "an idle watch gets a progress notification about every second";
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(got[i].type, want[i].type) << i;
        EXPECT_EQ(got[i].kv.key, want[i].key) << i;
        EXPECT_EQ(got[i].kv.value, want[i].value) << i;
        EXPECT_EQ(got[i].kv.mod_revision, want[i].revision) << i;
    }
    EXPECT_LT(lines, static_cast<int>(want.size()) / 100) << "catch-up comes in batches";
    char b[160];
    std::snprintf(b, sizeof b, "watch catch-up: %zu events over %lld revisions in %.3f s (%.0f events/s), %d lines",
                  got.size(), static_cast<long long>(applied - first + 1), caught_up_s,
                  caught_up_s > 0 ? got.size() / caught_up_s : 0.0, lines);
    figure(b);
}

// A watch that fell behind (its reader busy) gets the answers that piled up
// in one turn, each but the last marked as having more at hand, so that
// syncd can apply them in one write; none is lost or reordered, and an
// answer that comes alone is never marked (the caller would wait for more).
TEST(EtcdClient, AnswersThatPiledUpAreMarkedAsHavingMoreAtHand) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    auto writer = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);
    ASSERT_NE(writer, nullptr);
    constexpr int kPiled = 40;
    std::vector<int64_t> revisions;  // of the events seen, in order
    int answers = 0, marked = 0;
    bool last_marked = true;
    int64_t last_revision = 0;
    WatchOptions wo;
    wo.silence_timeout = 10s;
    Status s = c->watch(watch_prefix("/m/", 0), wo, [&](const WatchResponse &r) {
        if (r.created) {
            PutResponse p;
            EXPECT_OK(writer->put({"/m/first", "x"}, p));
            return true;
        }
        if (r.events.empty()) return true;  // a progress notification
        ++answers;
        marked += r.more_at_hand;
        last_marked = r.more_at_hand;
        for (const Event &e : r.events) revisions.push_back(e.kv.mod_revision);
        if (answers == 1) {
            // busy with the first answer while the next ones are written,
            // one revision each: they pile up on the connection
            for (int i = 0; i < kPiled; ++i) {
                PutResponse p;
                EXPECT_OK(writer->put({"/m/" + std::to_string(i), "x"}, p));
                last_revision = p.header.revision;
            }
            return true;
        }
        return revisions.back() < last_revision;
    });
    EXPECT_OK(s);
    ASSERT_EQ(revisions.size(), static_cast<size_t>(kPiled + 1));
    for (size_t i = 1; i < revisions.size(); ++i) EXPECT_EQ(revisions[i], revisions[i - 1] + 1) << i;
    EXPECT_GE(marked, 1) << answers << " answers";
    EXPECT_FALSE(last_marked) << "the last answer had nothing after it";
}

TEST(EtcdClient, CompactedRevisionsAreReportedAsSuch) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);
    PutResponse p;
    int64_t early = 0;
    for (int i = 0; i < 5; ++i) {
        ASSERT_OK(c->put({"/c/a", std::to_string(i)}, p));
        if (i == 0) early = p.header.revision;
    }
    CompactionResponse cr;
    ASSERT_OK(c->compact(p.header.revision, true, cr));

    RangeRequest old = one_key("/c/a");
    old.revision = early;
    RangeResponse r;
    Status s = c->range(old, r);
    EXPECT_EQ(s.code, Errc::kCompacted) << s.message;
    EXPECT_FALSE(s.retryable());

    WatchOptions wo;
    wo.silence_timeout = 10s;
    int results = 0;
    auto t0 = Clock::now();
    s = c->watch(watch_prefix("/c/", early), wo, [&](const WatchResponse &) {
        ++results;
        return true;
    });
    EXPECT_EQ(s.code, Errc::kCompacted) << s.message;
    EXPECT_EQ(s.compact_revision, p.header.revision);
    EXPECT_LT(seconds_since(t0), 5.0) << "the stream stays open; the client ends it";

    // a paged read whose pinned revision is compacted between two pages
    for (int i = 0; i < 30; ++i) ASSERT_OK(c->put({"/c/k" + std::to_string(100 + i), "x"}, p));
    int pages = 0;
    s = c->range_all(prefix("/c/k"), 10, [&](const RangeResponse &page) {
        ++pages;
        PutResponse later;
        EXPECT_OK(c->put({"/c/later", "x"}, later));
        CompactionResponse gone;
        EXPECT_OK(c->compact(later.header.revision, false, gone));
        (void)page;
        return true;
    });
    EXPECT_EQ(s.code, Errc::kCompacted) << s.message;
    EXPECT_EQ(pages, 1);
}

TEST(EtcdClient, CancelEndsABlockedWatchPromptly) {
    EtcdCluster etcd(1);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list());
    auto other = connect(etcd.endpoint_list());
    ASSERT_NE(c, nullptr);
    ASSERT_NE(other, nullptr);

    // cancel() from another thread
    std::atomic<bool> created{false};
    Status result;
    std::thread t([&] {
        WatchOptions wo;
        wo.silence_timeout = 0ms;  // never gives up by itself
        result = c->watch(watch_prefix("/quiet/", 0), wo, [&](const WatchResponse &r) {
            if (r.created) created = true;
            return true;
        });
    });
    bool was_created = wait_for([&] { return created.load(); }, 10s);
    auto t0 = Clock::now();
    c->cancel();
    t.join();
    double took = seconds_since(t0);
    EXPECT_TRUE(was_created);
    EXPECT_EQ(result.code, Errc::kCanceled) << result.message;
    EXPECT_LT(took, 1.0);
    figure("cancel() ended a blocked watch in " + std::to_string(took * 1000) + " ms");
    PutResponse p;
    EXPECT_EQ(c->put({"/x", "y"}, p).code, Errc::kCanceled) << "cancel() is for good";

    // the caller's stop flag
    std::atomic<bool> stop{false};
    created = false;
    std::thread t2([&] {
        WatchOptions wo;
        wo.silence_timeout = 0ms;
        wo.stop = &stop;
        result = other->watch(watch_prefix("/quiet/", 0), wo, [&](const WatchResponse &r) {
            if (r.created) created = true;
            return true;
        });
    });
    was_created = wait_for([&] { return created.load(); }, 10s);
    t0 = Clock::now();
    stop = true;
    t2.join();
    took = seconds_since(t0);
    EXPECT_TRUE(was_created);
    EXPECT_EQ(result.code, Errc::kCanceled) << result.message;
    EXPECT_LT(took, 1.0);
    figure("a stop flag ended a blocked watch in " + std::to_string(took * 1000) + " ms");
    EXPECT_OK(other->put({"/x", "y"}, p));  // a stop flag ends that watch only
}

// ---- three members: failover ---------------------------------------------

// The index of each member's role, read from the members themselves.
struct Roles {
    int leader = -1;
    std::vector<int> followers;
};

Roles roles_of(const EtcdCluster &etcd) {
    Roles roles;
    for (int i = 0; i < etcd.size(); ++i) {
        auto c = connect({etcd.endpoint(i)});
        StatusResponse st;
        if (c == nullptr || !c->status(st).ok()) continue;
        if (st.leader == st.header.member_id) roles.leader = i;
        else roles.followers.push_back(i);
    }
    return roles;
}

TEST(EtcdClientFailover, KillingTheMemberInUseFailsOverWithinTheDeadline) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    Roles roles = roles_of(etcd);
    ASSERT_GE(roles.leader, 0);
    ASSERT_EQ(roles.followers.size(), 2u);
    // a follower first: killing it needs no election (the leader's death is
    // the next test's)
    int used = roles.followers[0];
    std::vector<std::string> order = {etcd.endpoint(used), etcd.endpoint(roles.leader),
                                      etcd.endpoint(roles.followers[1])};
    auto c = connect(order, 5s);
    ASSERT_NE(c, nullptr);
    PutResponse p;
    ASSERT_OK(c->put({"/f/a", "1"}, p));
    EXPECT_EQ(c->preferred_endpoint(), etcd.endpoint(used));

    etcd.kill(used);
    auto t0 = Clock::now();
    ASSERT_OK(c->put({"/f/a", "2"}, p));
    double took = seconds_since(t0);
    EXPECT_LT(took, 5.0);
    EXPECT_NE(c->preferred_endpoint(), etcd.endpoint(used));
    RangeResponse r;
    ASSERT_OK(c->range(one_key("/f/a"), r));
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].value, "2");
    figure("member in use killed: next call succeeded via another in " + std::to_string(took * 1000) + " ms");
}

TEST(EtcdClientFailover, KillingTheLeaderCostsOneElection) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    Roles roles = roles_of(etcd);
    ASSERT_GE(roles.leader, 0);
    auto c = connect(etcd.endpoint_list(), 5s);
    ASSERT_NE(c, nullptr);
    PutResponse p;
    ASSERT_OK(c->put({"/l/a", "1"}, p));

    etcd.kill(roles.leader);
    // The survivors elect a leader (~1 s election timeout); meanwhile a call
    // may fail, but always retryably and within twice its deadline.
    auto t0 = Clock::now();
    int failures = 0;
    Status s;
    while (seconds_since(t0) < 60) {
        auto t1 = Clock::now();
        s = c->put({"/l/a", "2"}, p);
        EXPECT_LT(seconds_since(t1), 10.0);
        if (s.ok()) break;
        EXPECT_TRUE(s.retryable()) << errc_name(s.code) << ": " << s.message;
        ++failures;
    }
    ASSERT_OK(s);
    figure("leader killed: a write succeeded again after " + std::to_string(seconds_since(t0) * 1000) +
           " ms, " + std::to_string(failures) + " failed call(s) before");
}

TEST(EtcdClientFailover, AllMembersDownIsUnavailableWithinTheDeadline) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    const auto deadline = 2s;
    auto c = connect(etcd.endpoint_list(), deadline);
    ASSERT_NE(c, nullptr);
    PutResponse p;
    ASSERT_OK(c->put({"/d/a", "1"}, p));

    // stopped: connections are accepted by the kernel, nothing answers
    for (int i = 0; i < 3; ++i) etcd.stop(i);
    auto t0 = Clock::now();
    Status s = c->put({"/d/a", "2"}, p);
    double stopped_s = seconds_since(t0);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;
    EXPECT_LT(stopped_s, 2 * 2.0);
    EXPECT_GT(stopped_s, 0.5 * 2.0) << "each member had its share of the deadline";
    for (int i = 0; i < 3; ++i) {
        EXPECT_NE(s.message.find(etcd.endpoint(i)), std::string::npos) << s.message;
    }
    RangeResponse r;
    t0 = Clock::now();
    s = c->range(one_key("/d/a"), r);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;
    EXPECT_LT(seconds_since(t0), 2 * 2.0);

    // killed: refused at once
    for (int i = 0; i < 3; ++i) etcd.kill(i);
    t0 = Clock::now();
    s = c->put({"/d/a", "3"}, p);
    double killed_s = seconds_since(t0);
    EXPECT_EQ(s.code, Errc::kUnavailable) << s.message;
    EXPECT_LT(killed_s, 2 * 2.0);
    char b[160];
    std::snprintf(b, sizeof b, "all members down, deadline %d ms: unavailable after %.0f ms (stopped), %.1f ms (killed)",
                  2000, stopped_s * 1000, killed_s * 1000);
    figure(b);
}

TEST(EtcdClientFailover, AStoppedMemberEndsItsWatchAndTheNextWatchMovesOn) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    auto c = connect(etcd.endpoint_list(), 5s);
    auto writer = connect(etcd.endpoint_list(), 5s);
    ASSERT_NE(c, nullptr);
    ASSERT_NE(writer, nullptr);
    PutResponse p;
    ASSERT_OK(writer->put({"/s/a", "0"}, p));
    const int64_t from = p.header.revision + 1;
    const int used = etcd.index_of(c->preferred_endpoint());
    ASSERT_GE(used, 0);

    WatchOptions wo;
    wo.silence_timeout = 3s;
    std::atomic<bool> created{false};
    Status first;
    std::thread t([&] {
        first = c->watch(watch_prefix("/s/", from), wo, [&](const WatchResponse &r) {
            if (r.created) created = true;
            return true;
        });
    });
    bool was_created = wait_for([&] { return created.load(); }, 10s);
    etcd.stop(used);
    auto t0 = Clock::now();
    // joined whatever happens: at worst after the silence timeout
    t.join();
    double ended_s = seconds_since(t0);
    ASSERT_TRUE(was_created);
    EXPECT_EQ(first.code, Errc::kUnavailable) << first.message;
    EXPECT_LT(ended_s, 3.0 + 3.0);
    EXPECT_NE(c->preferred_endpoint(), etcd.endpoint(used));

    // the cluster still has a quorum; a write is seen by the next watch, on
    // another member (after an election if the stopped one led)
    ASSERT_OK(put_until_ok(*writer, {"/s/a", "1"}, 30s));
    std::string value;
    auto t1 = Clock::now();
    Status second = c->watch(watch_prefix("/s/", from), wo, [&](const WatchResponse &r) {
        for (const Event &e : r.events) value = e.kv.value;
        return value.empty() && seconds_since(t1) < 30;
    });
    EXPECT_OK(second);
    EXPECT_EQ(value, "1");
    EXPECT_NE(c->preferred_endpoint(), etcd.endpoint(used));
    etcd.resume(used);
    char b[160];
    std::snprintf(b, sizeof b, "stopped member: its watch ended after %.0f ms (silence limit 3000 ms)",
                  ended_s * 1000);
    figure(b);
}

TEST(EtcdClientFailover, AMemberWithoutALeaderEndsTheWatchWithNoLeader) {
    EtcdCluster etcd(3);
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    // one endpoint only: the member that will be left alone
    auto c = connect({etcd.endpoint(0)}, 5s);
    ASSERT_NE(c, nullptr);
    WatchOptions wo;
    wo.silence_timeout = 30s;  // progress notifications keep coming: not silent
    std::atomic<bool> created{false};
    Status result;
    std::thread t([&] {
        result = c->watch(watch_prefix("/n/", 0), wo, [&](const WatchResponse &r) {
            if (r.created) created = true;
            return true;
        });
    });
    bool was_created = wait_for([&] { return created.load(); }, 10s);
    etcd.stop(1);
    etcd.stop(2);
    auto t0 = Clock::now();
    t.join();
    double ended_s = seconds_since(t0);
    ASSERT_TRUE(was_created);
    EXPECT_EQ(result.code, Errc::kNoLeader) << result.message;
    EXPECT_TRUE(result.retryable());
    EXPECT_LT(ended_s, 20.0);

    // a unary call on it fails within its deadline, retryably
    RangeResponse r;
    auto t1 = Clock::now();
    Status s = c->range(one_key("/n/a"), r);
    double range_s = seconds_since(t1);
    EXPECT_TRUE(s.retryable()) << errc_name(s.code) << ": " << s.message;
    EXPECT_LT(range_s, 2 * 5.0);
    etcd.resume(1);
    etcd.resume(2);
    char b[200];
    std::snprintf(b, sizeof b, "leader lost: watch ended (%s) after %.0f ms; a range answered %s after %.0f ms",
                  errc_name(result.code), ended_s * 1000, errc_name(s.code), range_s * 1000);
    figure(b);
}

}  // namespace
