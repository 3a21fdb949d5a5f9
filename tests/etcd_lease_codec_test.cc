// The Lease service over the JSON gateway, and the lease on a put. The
// answers under tests/fixtures/etcd/lease_*, range_leased.json and
// error_lease_not_found.json were recorded with curl from a real etcd 3.4.23
// member (Debian's etcd-server), one lease's life: grant, keep-alive, a put
// attached to it, revoke, keep-alive once gone, revoke once gone.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "etcd_codec.h"
#include "etcd_fixtures.h"

using namespace keyauth::etcd;
using keyauth::testing::etcd_fixture;
using keyauth::testing::fixture_lines;
using nlohmann::json;

namespace {

// The ids of the member these fixtures were recorded from.
constexpr uint64_t kClusterId = 7801232528081817440u;
constexpr uint64_t kMemberId = 13458989633860879742u;  // over INT64_MAX
constexpr int64_t kLease = 5007618104109553438;

void expect_header(const ResponseHeader &h, int64_t revision) {
    EXPECT_EQ(h.cluster_id, kClusterId);
    EXPECT_EQ(h.member_id, kMemberId);
    EXPECT_EQ(h.revision, revision);
    EXPECT_EQ(h.raft_term, 2u);
}

TEST(EtcdLeaseRequests, GrantKeepAliveRevokeSendUpperCaseInt64Strings) {
    EXPECT_EQ(json::parse(build_lease_grant_request({10, 0})), json::parse(R"({"TTL":"10"})"));
    EXPECT_EQ(json::parse(build_lease_grant_request({2, kLease})),
              json::parse(R"({"TTL":"2","ID":"5007618104109553438"})"));
    EXPECT_EQ(json::parse(build_lease_keepalive_request(kLease)),
              json::parse(R"({"ID":"5007618104109553438"})"));
    EXPECT_EQ(json::parse(build_lease_revoke_request(kLease)),
              json::parse(R"({"ID":"5007618104109553438"})"));
}

TEST(EtcdLeaseRequests, PutCarriesItsLeaseAlsoInsideATxn) {
    PutRequest p{"leader/webhooks", "host-a:42:9f1c", kLease};
    const json put = json::parse(R"({"key":"bGVhZGVyL3dlYmhvb2tz","value":"aG9zdC1hOjQyOjlmMWM=",)"
                                 R"("lease":"5007618104109553438"})");
    EXPECT_EQ(json::parse(build_put_request(p)), put);
    EXPECT_EQ(json::parse(build_put_request({"k", "v"})), json::parse(R"({"key":"aw==","value":"dg=="})"))
        << "no lease: no field";
    TxnRequest t;
    t.compare.push_back(Compare::absent("leader/webhooks"));
    t.success.emplace_back(p);
    RangeRequest read;
    read.key = "leader/webhooks";
    t.failure.emplace_back(read);
    json txn = json::parse(build_txn_request(t));
    EXPECT_EQ(txn["success"][0]["request_put"], put);
}

TEST(EtcdLeaseAnswers, GrantAndRevoke) {
    LeaseGrantResponse g;
    std::string error;
    ASSERT_TRUE(parse_lease_grant_response(etcd_fixture("lease_grant.json"), g, error)) << error;
    expect_header(g.header, 3);
    EXPECT_EQ(g.id, kLease);
    EXPECT_EQ(g.ttl_seconds, 10);
    LeaseRevokeResponse r;
    ASSERT_TRUE(parse_lease_revoke_response(etcd_fixture("lease_revoke.json"), r, error)) << error;
    expect_header(r.header, 5);  // the revoke deleted the attached key: a revision
}

TEST(EtcdLeaseAnswers, GrantWithoutIdOrTtlOrWithItsErrorFieldIsRefused) {
    LeaseGrantResponse g;
    std::string error;
    const std::string header = R"("header":{"revision":"3"})";
    EXPECT_FALSE(parse_lease_grant_response("{" + header + R"(,"TTL":"10"})", g, error));
    EXPECT_FALSE(parse_lease_grant_response("{" + header + R"(,"ID":"7"})", g, error));
    EXPECT_FALSE(parse_lease_grant_response("{" + header + R"(,"ID":"7","TTL":"2","error":"no"})", g, error));
    EXPECT_NE(error.find("no"), std::string::npos) << error;
    EXPECT_FALSE(parse_lease_grant_response(R"({"ID":"7","TTL":"2"})", g, error)) << "no header";
    ASSERT_TRUE(parse_lease_grant_response("{" + header + R"(,"ID":7,"TTL":2})", g, error)) << error;
    EXPECT_EQ(g.id, 7);
}

TEST(EtcdLeaseAnswers, KeepAliveIsOneStreamLineAndTtlZeroMeansGone) {
    auto live = fixture_lines(etcd_fixture("lease_keepalive.ndjson"));
    ASSERT_EQ(live.size(), 1u) << "the gateway answers the one request and closes the stream";
    LeaseKeepAliveLine k;
    std::string error;
    ASSERT_TRUE(parse_lease_keepalive_line(live[0], k, error)) << error;
    EXPECT_FALSE(k.is_error);
    expect_header(k.result.header, 3);
    EXPECT_EQ(k.result.id, kLease);
    EXPECT_EQ(k.result.ttl_seconds, 10);

    auto gone = fixture_lines(etcd_fixture("lease_keepalive_gone.ndjson"));
    ASSERT_EQ(gone.size(), 1u);
    ASSERT_TRUE(parse_lease_keepalive_line(gone[0], k, error)) << error;
    EXPECT_FALSE(k.is_error);
    EXPECT_EQ(k.result.id, kLease);
    EXPECT_EQ(k.result.ttl_seconds, 0) << "TTL omitted: the lease is gone";
}

TEST(EtcdLeaseAnswers, KeepAliveStreamErrorAndOddLines) {
    LeaseKeepAliveLine k;
    std::string error;
    // the shape of the watch's stream errors (tests/fixtures/etcd/watch_no_leader.ndjson)
    ASSERT_TRUE(parse_lease_keepalive_line(
        R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}})", k, error))
        << error;
    EXPECT_TRUE(k.is_error);
    EXPECT_TRUE(k.error.is_no_leader());
    EXPECT_FALSE(parse_lease_keepalive_line(R"({"neither":1})", k, error));
    EXPECT_NE(error.find("keep-alive"), std::string::npos) << error;
    EXPECT_FALSE(parse_lease_keepalive_line(R"({"result":[]})", k, error));
    EXPECT_FALSE(parse_lease_keepalive_line(R"({"result":{"ID":"1","TTL":"2"}})", k, error)) << "no header";
    EXPECT_FALSE(parse_lease_keepalive_line(R"({"result":{"header":{},"ID":"1","TTL":"x"}})", k, error));
    EXPECT_FALSE(parse_lease_keepalive_line("", k, error));
}

TEST(EtcdLeaseAnswers, LeaseNotFoundIsItsOwnError) {
    GatewayError e;
    std::string error;
    ASSERT_TRUE(parse_gateway_error(etcd_fixture("error_lease_not_found.json"), e, error)) << error;
    EXPECT_EQ(e.grpc_code, 5);
    EXPECT_TRUE(e.is_lease_not_found());
    EXPECT_FALSE(e.is_no_leader());
    EXPECT_FALSE(e.is_compacted());
    ASSERT_TRUE(parse_gateway_error(etcd_fixture("error_compacted.json"), e, error)) << error;
    EXPECT_FALSE(e.is_lease_not_found());
}

TEST(EtcdLeaseAnswers, RangeReadsTheKeysLease) {
    RangeResponse r;
    std::string error;
    ASSERT_TRUE(parse_range_response(etcd_fixture("range_leased.json"), r, error)) << error;
    ASSERT_EQ(r.kvs.size(), 1u);
    EXPECT_EQ(r.kvs[0].key, "leader/webhooks");
    EXPECT_EQ(r.kvs[0].value, "host-a:42:9f1c");
    EXPECT_EQ(r.kvs[0].lease, kLease);
    EXPECT_EQ(r.kvs[0].create_revision, 4);
    ASSERT_TRUE(parse_range_response(etcd_fixture("range_prefix.json"), r, error)) << error;
    for (const KeyValue &kv : r.kvs) EXPECT_EQ(kv.lease, 0) << "no lease: omitted";
}

}  // namespace
