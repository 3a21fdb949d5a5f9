// Plan records, catalog validation and import parsing, and the edge's
// rendered catalog over a real store.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <sstream>

#include "catalog.h"
#include "catalog_json.h"
#include "edge.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;
using nlohmann::json;

namespace {

PlanRecord plan(const std::string &id, uint64_t paise, int32_t order, bool popular = false) {
    PlanRecord p;
    p.id = id;
    p.name = "Plan " + id;
    p.price_paise = paise;
    p.features = {"100 pages", "30 days of support"};
    p.popular = popular;
    p.sort_order = order;
    return p;
}

std::string seed_text() {
    std::ifstream in("lmdb_schema/plans.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void expect_invalid(const std::function<void()> &fn, const std::string &field) {
    try {
        fn();
        ADD_FAILURE() << "accepted; expected an error on " << field;
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid);
        EXPECT_EQ(e.field(), field) << e.what();
    }
}

}  // namespace

TEST(PlanRecord, RoundTripAndCorruption) {
    PlanRecord p = plan("pro-10k", 599900, 60, true);
    std::string bytes = encode_plan_record(p);
    PlanRecordView v;
    ASSERT_EQ(decode_plan_record(bytes.data(), bytes.size(), v), DecodeStatus::kOk);
    PlanRecord back = v.to_owned("pro-10k");
    EXPECT_EQ(back.name, p.name);
    EXPECT_EQ(back.price_paise, 599900u);
    EXPECT_EQ(back.features, p.features);
    EXPECT_TRUE(back.popular);
    EXPECT_EQ(back.sort_order, 60);
    for (size_t n = 0; n < bytes.size(); n++) {
        EXPECT_NE(decode_plan_record(bytes.data(), n, v), DecodeStatus::kOk) << n;
    }
    bytes[0] = 9;
    EXPECT_EQ(decode_plan_record(bytes.data(), bytes.size(), v), DecodeStatus::kUnknownVersion);
}

TEST(FxRecord, RoundTrip) {
    std::string bytes = encode_fx_record({83123456, 42});
    FxRecord fx;
    ASSERT_EQ(decode_fx_record(bytes.data(), bytes.size(), fx), DecodeStatus::kOk);
    EXPECT_EQ(fx.inr_per_usd_micro, 83123456u);
    EXPECT_EQ(fx.set_ms, 42);
    EXPECT_EQ(decode_fx_record(bytes.data(), bytes.size() - 1, fx), DecodeStatus::kCorrupt);
}

TEST(Catalog, SeedFileIsValidAndHasTenPlans) {
    auto plans = parse_catalog(seed_text());
    EXPECT_NO_THROW(validate_catalog(plans));
    EXPECT_EQ(plans.size(), 10u);
}

TEST(Catalog, ValidationNamesThePlanAndField) {
    std::vector<PlanRecord> ok = {plan("a", 100, 1, true), plan("b", 200, 2)};
    EXPECT_NO_THROW(validate_catalog(ok));
    auto with = [&](auto mutate) {
        auto plans = ok;
        mutate(plans);
        return [plans] { validate_catalog(plans); };
    };
    expect_invalid(with([](auto &p) { p[1].popular = true; }), "plans");
    expect_invalid(with([](auto &p) { p[0].popular = false; }), "plans");
    expect_invalid(with([](auto &p) { p[1].id = "a"; }), "plans[1].id");
    expect_invalid(with([](auto &p) { p[1].id = "B"; }), "plans[1].id");
    expect_invalid(with([](auto &p) { p[1].id = std::string(65, 'a'); }), "plans[1].id");
    expect_invalid(with([](auto &p) { p[0].price_paise = 0; }), "plans[0].priceInr");
    expect_invalid(with([](auto &p) { p[1].sort_order = 1; }), "plans[1].sortOrder");
    expect_invalid(with([](auto &p) { p[0].name = ""; }), "plans[0].name");
    expect_invalid(with([](auto &p) { p[0].features.clear(); }), "plans[0].features");
    expect_invalid(with([](auto &p) { p[0].features = {std::string(201, 'f')}; }), "plans[0].features");
    expect_invalid([] { validate_catalog({}); }, "plans");
}

TEST(Catalog, ImportParsingIsStrictAboutPrices) {
    auto doc = [](const std::string &price) {
        return R"({"plans":[{"id":"a","name":"A","priceInr":)" + price +
               R"(,"features":["x"],"popular":true,"sortOrder":1}]})";
    };
    EXPECT_EQ(parse_catalog(doc("4999"))[0].price_paise, 499900u);
    // a repeated member: which price was meant is unknown
    expect_invalid([&] { parse_catalog(doc("1,\"priceInr\":2")); }, "catalog");
    EXPECT_EQ(parse_catalog(doc("\"4999.5\""))[0].price_paise, 499950u);
    for (std::string bad : {"4999.5", "-1", "0", "\"4999.505\"", "\"abc\"", "true", "null"}) {
        expect_invalid([&] { parse_catalog(doc(bad)); }, "plans[0].priceInr");
    }
    auto order = [](const std::string &n) {
        return R"({"plans":[{"id":"a","name":"A","priceInr":1,"features":["x"],"popular":true,"sortOrder":)" +
               n + "}]}";
    };
    EXPECT_EQ(parse_catalog(order("-2147483648"))[0].sort_order, INT32_MIN);
    EXPECT_EQ(parse_catalog(order("2147483647"))[0].sort_order, INT32_MAX);
    for (std::string bad : {"2147483648", "-2147483649", "18446744073709551615", "1.5", "\"1\""}) {
        expect_invalid([&] { parse_catalog(order(bad)); }, "plans[0].sortOrder");
    }
    expect_invalid([] { parse_catalog("not json"); }, "catalog");
    expect_invalid([] { parse_catalog(R"({"plans":[],"extra":1})"); }, "catalog");
    expect_invalid([] { parse_catalog(R"({"plans":{}})"); }, "plans");
    expect_invalid([] { parse_catalog(R"({"plans":[{"id":"a"}]})"); }, "plans[0].features");
}

class EdgeCatalogTest : public ::testing::Test {
protected:
    TempDir dir;
    Store store{dir.sub("db")};
    ka_edge_t *edge = nullptr;

    void SetUp() override {
        store.import_plans({plan("b", 100000, 20), plan("a", 19900, 10, true)});
        char err[256];
        edge = ka_edge_open(dir.sub("db").c_str(), err, sizeof err);
        ASSERT_NE(edge, nullptr) << err;
    }
    void TearDown() override { ka_edge_close(edge); }

    ka_plans_result_t get(const char *id = nullptr) {
        ka_plans_result_t r;
        ka_edge_plans(edge, id, id ? strlen(id) : 0, &r);
        return r;
    }
    static json body(const ka_plans_result_t &r) {
        return json::parse(std::string(r.body.data, r.body.len));
    }
};

TEST_F(EdgeCatalogTest, NoRateMeansNoPrices) {
    EXPECT_EQ(get().status, KA_PLANS_NO_RATE);
}

TEST_F(EdgeCatalogTest, RendersSortedWithExactPrices) {
    store.set_exchange_rate(83123456);
    auto r = get();
    ASSERT_EQ(r.status, KA_PLANS_OK) << r.reason;
    json plans = body(r)["plans"];
    ASSERT_EQ(plans.size(), 2u);
    EXPECT_EQ(plans[0]["id"], "a");
    EXPECT_EQ(plans[0]["priceInr"], 199);
    EXPECT_EQ(plans[0]["priceUsd"], "2.39");  // 199 / 83.123456 = 2.3940...
    EXPECT_EQ(plans[0]["exchangeRate"], "83.123456");
    EXPECT_EQ(plans[1]["priceUsd"], "12.03");  // 1000 / 83.123456 = 12.0302...
    EXPECT_EQ(plans[0]["popular"], true);
}

TEST_F(EdgeCatalogTest, OnePlanAndUnknownPlan) {
    store.set_exchange_rate(80000000);
    auto r = get("b");
    ASSERT_EQ(r.status, KA_PLANS_OK);
    EXPECT_EQ(body(r)["priceUsd"], "12.50");
    EXPECT_EQ(get("zzz").status, KA_PLANS_NOT_FOUND);
    EXPECT_EQ(get("").status, KA_PLANS_NOT_FOUND);
}

TEST_F(EdgeCatalogTest, ChangesShowOnTheNextCallWithANewEtag) {
    store.set_exchange_rate(80000000);
    auto first = get();
    std::string etag(first.etag.data, first.etag.len);
    auto again = get();
    EXPECT_EQ(std::string(again.etag.data, again.etag.len), etag) << "cached";
    store.set_exchange_rate(100000000);
    auto moved = get();
    EXPECT_NE(std::string(moved.etag.data, moved.etag.len), etag);
    EXPECT_EQ(body(moved)["plans"][0]["priceUsd"], "1.99");
    store.import_plans({plan("c", 500, 1, true)});
    auto replaced = get();
    EXPECT_EQ(body(replaced)["plans"].size(), 1u);
    EXPECT_EQ(get("a").status, KA_PLANS_NOT_FOUND);
}

TEST_F(EdgeCatalogTest, PaymentServiceLookupInProcess) {
    auto p = store.find_plan("a");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->price_paise, 19900u);
    EXPECT_FALSE(store.find_plan("nope"));
    EXPECT_FALSE(store.find_plan(std::string(1000, 'a')));
}

// Routing under a keyauth_plans location: exact on the normalized URI, and
// only for a path the client spelled in that normal form.
namespace {

PlanRoute route(std::string_view uri, std::string_view base = "/api/plans") {
    return route_plans(base, uri, &uri);  // the client sent exactly uri
}

}  // namespace

TEST(PlanRoute, TheCatalogAndOnePlan) {
    using K = PlanRoute::Kind;
    EXPECT_EQ(route("/api/plans").kind, K::kCatalog);
    EXPECT_EQ(route("/api/plans/").kind, K::kCatalog);
    auto one = route("/api/plans/plus-5k");
    EXPECT_EQ(one.kind, K::kPlan);
    EXPECT_EQ(one.id, "plus-5k");
    // the id is passed on as it is; the lookup decides (case-sensitive)
    EXPECT_EQ(route("/api/plans/PLUS-5K").id, "PLUS-5K");
}

TEST(PlanRoute, AnythingElseUnderTheLocationIsNotFound) {
    using K = PlanRoute::Kind;
    for (std::string_view uri : {
             "/api/plansplus-5k",       // a prefix location also matches this
             "/api/plans-plus-5k",
             "/api/plans.json",
             "/api/plans/plus-5k/",     // a trailing slash after an id
             "/api/plans/plus-5k/x",    // deeper
             "/api/plans//plus-5k",     // an empty segment (merge_slashes off)
             "/api/plans//",
             "/api/plans///",
             "/api/plan",               // shorter than the prefix
             "/other",
             "",
         }) {
        EXPECT_EQ(route(uri).kind, K::kNotFound) << uri;
    }
}

TEST(PlanRoute, TheClientMustSpellTheNormalForm) {
    using K = PlanRoute::Kind;
    struct Case {
        std::string_view raw, uri;  // as sent, and as nginx normalized it
    };
    for (const Case &c : {
             Case{"/api/plans/plus%2D5k", "/api/plans/plus-5k"},
             Case{"/api/plans/plus-5k%2d", "/api/plans/plus-5k-"},
             Case{"/api/plans%2Fplus-5k", "/api/plans/plus-5k"},
             Case{"/api/plans/./plus-5k", "/api/plans/plus-5k"},
             Case{"/api/plans/x/../plus-5k", "/api/plans/plus-5k"},
             Case{"/api/plans/x%2F..%2Fplus-5k", "/api/plans/plus-5k"},
             Case{"/api/plans//plus-5k", "/api/plans/plus-5k"},
             Case{"/api//plans/plus-5k", "/api/plans/plus-5k"},
             Case{"/api/plans/plus-5k#", "/api/plans/plus-5k"},
             Case{"/api/plans/.", "/api/plans/"},
             Case{"/api/%70lans", "/api/plans"},
         }) {
        EXPECT_EQ(route_plans("/api/plans", c.uri, &c.raw).kind, K::kNotFound) << c.raw;
        // a URI the configuration made (rewrite, internal redirect) is taken
        // as it is
        EXPECT_NE(route_plans("/api/plans", c.uri, nullptr).kind, K::kNotFound) << c.raw;
    }
}

TEST(PlanRoute, TheBaseIsTheLocationPrefix) {
    using K = PlanRoute::Kind;
    // location /api/plans/ : the same paths under it
    EXPECT_EQ(route("/api/plans/", "/api/plans/").kind, K::kCatalog);
    EXPECT_EQ(route("/api/plans/plus-5k", "/api/plans/").id, "plus-5k");
    EXPECT_EQ(route("/api/plans/plus-5k/", "/api/plans/").kind, K::kNotFound);
    // mounted elsewhere
    EXPECT_EQ(route("/billing/plans", "/billing/plans").kind, K::kCatalog);
    EXPECT_EQ(route("/billing/plans/basic", "/billing/plans").id, "basic");
    EXPECT_EQ(route("/api/plans/basic", "/billing/plans").kind, K::kNotFound);
    // location / : the root lists, one segment is a plan
    EXPECT_EQ(route("/", "/").kind, K::kCatalog);
    EXPECT_EQ(route("/basic", "/").id, "basic");
    EXPECT_EQ(route("/basic/x", "/").kind, K::kNotFound);
}

TEST(PlanRoute, TheCApiMapsEveryVerdict) {
    ka_str_t base{"/api/plans", 10}, id{nullptr, 0};
    ka_str_t list{"/api/plans/", 11}, one{"/api/plans/basic", 16}, bad{"/api/plansbasic", 15};
    EXPECT_EQ(ka_plans_route(base, list, &list, &id), KA_PLANS_ROUTE_CATALOG);
    EXPECT_EQ(ka_plans_route(base, one, &one, &id), KA_PLANS_ROUTE_PLAN);
    EXPECT_EQ(std::string(id.data, id.len), "basic");
    EXPECT_EQ(ka_plans_route(base, bad, nullptr, &id), KA_PLANS_ROUTE_NOT_FOUND);
    ka_str_t encoded{"/api/plans/b%61sic", 18};
    EXPECT_EQ(ka_plans_route(base, one, &encoded, &id), KA_PLANS_ROUTE_NOT_FOUND);
    EXPECT_EQ(ka_plans_route(base, one, nullptr, &id), KA_PLANS_ROUTE_PLAN);
}
