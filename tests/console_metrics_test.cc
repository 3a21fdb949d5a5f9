// keyauthd's /metrics: route templates (few series, whatever clients send),
// the histograms' cumulative buckets, and the store's gauges.
#include "console_metrics.h"

#include <gtest/gtest.h>

#include "store.h"
#include "temp_dir.h"

using namespace keyauth;

TEST(ConsoleMetrics, RoutesAreTemplates) {
    EXPECT_EQ(metrics_route("/v1/keys"), "/v1/keys");
    EXPECT_EQ(metrics_route("/v1/keys/key_0123"), "/v1/keys/{id}");
    EXPECT_EQ(metrics_route("/v1/keys/anything/revoke"), "/v1/keys/{id}/revoke");
    EXPECT_EQ(metrics_route("/v1/keys/x/roll"), "/v1/keys/{id}/roll");
    EXPECT_EQ(metrics_route("/v1/audit"), "/v1/audit");
    EXPECT_EQ(metrics_route("/v1/account"), "/v1/account");
    EXPECT_EQ(metrics_route("/metrics"), "/metrics");
    for (const char *p : {"", "/", "/v1/keys/", "/v1/keys//revoke", "/v1/keys/x/y", "/v1/keys/x/revoke/",
                          "/v1/keysx", "/etc/passwd", "/v1/audit/1"}) {
        EXPECT_EQ(metrics_route(p), "other") << p;
    }
}

TEST(ConsoleMetrics, CountsAndHistograms) {
    ConsoleMetrics m;
    m.observe_request("POST", "/v1/keys", 201, 0.003);
    m.observe_request("POST", "/v1/keys", 201, 0.2);
    m.observe_request("BREW", "/v1/keys/key_1", 405, 20);
    m.observe_write(0.002);
    std::string text = m.render(StoreGauges{});
    EXPECT_NE(text.find("keyauthd_requests_total{route=\"/v1/keys\",method=\"POST\",status=\"201\"} 2\n"),
              std::string::npos) << text;
    EXPECT_NE(text.find("keyauthd_requests_total{route=\"/v1/keys/{id}\",method=\"other\",status=\"405\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("keyauthd_request_duration_seconds_bucket{route=\"/v1/keys\",le=\"0.0025\"} 0\n"),
              std::string::npos);
    EXPECT_NE(text.find("keyauthd_request_duration_seconds_bucket{route=\"/v1/keys\",le=\"0.005\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("keyauthd_request_duration_seconds_bucket{route=\"/v1/keys\",le=\"0.25\"} 2\n"),
              std::string::npos);
    EXPECT_NE(text.find("keyauthd_request_duration_seconds_bucket{route=\"/v1/keys/{id}\",le=\"10\"} 0\n"),
              std::string::npos) << "20 s is past the last bound";
    EXPECT_NE(text.find("keyauthd_request_duration_seconds_bucket{route=\"/v1/keys/{id}\",le=\"+Inf\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("keyauthd_store_write_seconds_count 1\n"), std::string::npos);
    EXPECT_EQ(text.find("keyauthd_store_keys"), std::string::npos) << "a gauge the backend cannot tell is left out";
}

TEST(ConsoleMetrics, StoreGaugesAndMethods) {
    keyauth::testing::TempDir dir;
    Store store(dir.sub("db"));
    CreatedAccount a = store.create_account("acme", 100);
    (void)a;
    ConsoleMetrics m;
    HttpRequest get;
    get.method = "GET";
    get.path = "/metrics";
    HttpResponse r = m.handle(get, store);
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("keyauthd_store_accounts 1\n"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("keyauthd_store_keys 0\n"), std::string::npos);
    EXPECT_NE(r.body.find("keyauthd_store_map_bytes "), std::string::npos);
    HttpRequest post = get;
    post.method = "POST";
    EXPECT_EQ(m.handle(post, store).status, 405);
}
