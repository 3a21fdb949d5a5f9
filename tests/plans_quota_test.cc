// Plans carry entitlements, accounts are on a plan, keys carry quotas
// (issue 28), on both backends: the catalog file's entitlements, set-plan
// and the effective values, overrides and "follow the plan", the cap from
// the plan at key creation, the key quota's round trip through the console
// API (used read by the roll chain's rate id), GET /v1/account, and every
// bad input refused with nothing written.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <utility>
#include <sstream>

#include "catalog_json.h"
#include "console_fixture.h"
#include "quota_json.h"
#include "quota_period.h"
#include "racing_backend.h"

namespace keyauth::testing {
namespace {

// What the edge's ledger would say: fixed counts by subject id, and every id asked for.
class FakeQuotaUsage : public QuotaUsageSource {
public:
    std::map<std::pair<QuotaSubject, Id>, uint64_t> counts;
    std::vector<Id> asked;
    uint64_t used(QuotaSubject subject, const Id &id, uint8_t, int64_t) override {
        asked.push_back(id);
        auto it = counts.find({subject, id});
        return it == counts.end() ? 0 : it->second;
    }
};

std::string seed_text() {
    std::ifstream in("lmdb_schema/plans.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string catalog_with(const std::string &entitlements) {
    return R"({"plans":[{"id":"a","name":"A","priceInr":1,"features":["x"],"popular":true,"sortOrder":1,)"
           R"("entitlements":)" +
           entitlements + "}]}";
}

// The field a refusal names ("" if it was not a kInvalid StoreError).
template <class Fn>
std::string invalid_field(Fn &&fn) {
    try {
        fn();
    } catch (const StoreError &e) {
        return e.kind() == StoreError::Kind::kInvalid ? e.field() : "kind " + std::to_string(int(e.kind()));
    }
    return "accepted";
}

class PlansQuotaTest : public ConsoleApiTest {
protected:
    int64_t now = 1'800'000'000'000;  // 2027-01-15T08:00:00Z
    FakeQuotaUsage usage;
    ConsoleApi quota_api{store, nullptr, &usage};

    void SetUp() override {
        store.set_clock([this] { return now; });
        store.set_exchange_rate(83'000'000);
        store.import_plans(parse_catalog(seed_text()));
    }
    // As call(), through the console that reads quota use from `usage`.
    HttpResponse qcall(const std::string &method, const std::string &path, const CreatedAccount &who,
                       const std::string &body = "") {
        return quota_api.handle(request(method, path, &who, body));
    }
    Entitlements effective(const Id &id) { return store.find_account_on_plan(id)->effective; }
    size_t audit_count(const Id &id) { return store.list_audit(id, 1000, std::nullopt).events.size(); }
    static json key_body() { return {{"name", "k"}, {"scopes", {"ip:read"}}, {"rateLimitPerMinute", 600}}; }
};

}  // namespace

TEST(PlanEntitlements, TheSeedCatalogStatesWhatItsFeaturesSay) {
    auto plans = parse_catalog(seed_text());
    ASSERT_EQ(plans.size(), 10u);
    const PlanRecord &trial = plans.front();
    EXPECT_EQ(trial.id, "trial-100");
    EXPECT_TRUE(trial.states & KA_PLAN_STATES_QUOTA);
    EXPECT_EQ(trial.quota, (Quota{KA_QUOTA_MONTH, 100}));
    EXPECT_TRUE(trial.states & KA_PLAN_STATES_MAX_KEYS);
    EXPECT_EQ(trial.max_keys, 1u);
    const PlanRecord &top = plans.back();
    EXPECT_EQ(top.id, "unlimited");
    EXPECT_TRUE(top.states & KA_PLAN_STATES_QUOTA);  // stated: unlimited
    EXPECT_TRUE(top.quota.none());
    // what keyauthctl shows; GET /api/plans is rendered at the edge without it
    EXPECT_EQ(plan_to_json(top)["entitlements"], json::parse(R"({"quota":null})"));
}

TEST(PlanEntitlements, AMalformedEntitlementNamesThePlanAndTheField) {
    EXPECT_EQ(parse_catalog(catalog_with("{}"))[0].states, 0);
    auto p = parse_catalog(catalog_with(R"({"rateLimitPerMinute":5,"maxKeys":2,"quota":{"units":9,"period":"day"}})"));
    EXPECT_EQ(p[0].rate_rpm, 5u);
    EXPECT_EQ(p[0].max_keys, 2u);
    EXPECT_EQ(p[0].quota, (Quota{KA_QUOTA_DAY, 9}));
    const std::pair<const char *, const char *> bad[] = {
        {R"({"quota":{"units":0,"period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":-5,"period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":9007199254740993,"period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":281474976710656,"period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":1.5,"period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":"10","period":"month"}})", "plans[0].entitlements.quota.units"},
        {R"({"quota":{"units":10,"period":"week"}})", "plans[0].entitlements.quota.period"},
        {R"({"quota":{"units":10,"period":"total"}})", "plans[0].entitlements.quota.period"},
        {R"({"quota":{"units":10}})", "plans[0].entitlements.quota.period"},
        {R"({"quota":{"units":10,"period":"day","burst":1}})", "plans[0].entitlements.quota.burst"},
        {R"({"quota":5})", "plans[0].entitlements.quota"},
        {R"({"maxKeys":0})", "plans[0].entitlements.maxKeys"},
        {R"({"maxKeys":"3"})", "plans[0].entitlements.maxKeys"},
        {R"({"rateLimitPerMinute":0})", "plans[0].entitlements.rateLimitPerMinute"},
        {R"({"rateLimitPerMinute":10000001})", "plans[0].entitlements.rateLimitPerMinute"},
        {R"({"rateLimit":5})", "plans[0].entitlements.rateLimit"},
        {R"([])", "plans[0].entitlements"},
        {R"(null)", "plans[0].entitlements"},
    };
    for (const auto &[entitlements, field] : bad) {
        try {
            parse_catalog(catalog_with(entitlements));
            ADD_FAILURE() << entitlements << ": accepted";
        } catch (const StoreError &e) {
            EXPECT_EQ(e.field(), field) << entitlements;
            EXPECT_NE(std::string(e.what()).find("(plan \"a\")"), std::string::npos) << e.what();
        }
    }
}

TEST(QuotaUsage, TheLedgerIsReadOnceItExistsAndMissingIsNothingUsed) {
    TempDir dir;
    const std::string path = dir.sub("quota.ledger");
    auto source = make_ledger_quota_usage(path);
    Id id{};
    id[0] = 7;
    const int64_t now = 1'800'000'000'000;
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now), 0u);  // no file yet
    std::string err;
    auto ledger = QuotaLedger::open(path, /*writable=*/true, err, 1024);
    ASSERT_TRUE(ledger) << err;
    QuotaRef ref;
    const uint16_t tag = quota_period_tag(KA_QUOTA_MONTH, now);
    ASSERT_TRUE(ledger->find(QuotaSubject::kKey, id.data(), tag, now, ref));
    uint64_t after = 0;
    ASSERT_EQ(ledger->charge(QuotaSubject::kKey, id.data(), ref, tag, 5, 100, true, now, &after),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now), 5u);
    // another subject, another period: nothing
    EXPECT_EQ(source->used(QuotaSubject::kAccount, id, KA_QUOTA_MONTH, now), 0u);
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now + 40LL * 86'400'000), 0u);
}

TEST(QuotaUsage, ALedgerMadeAnewIsReadAndARemovedOneKeepsItsCounts) {
    TempDir dir;
    const std::string path = dir.sub("quota.ledger");
    auto source = make_ledger_quota_usage(path);
    Id id{};
    id[0] = 9;
    const int64_t now = 1'800'000'000'000;
    const uint16_t tag = quota_period_tag(KA_QUOTA_MONTH, now);
    auto charged = [&](const std::string &file, uint64_t units) {
        std::string err;
        auto ledger = QuotaLedger::open(file, /*writable=*/true, err, 1024);
        EXPECT_TRUE(ledger) << err;
        QuotaRef ref;
        uint64_t after = 0;
        EXPECT_TRUE(ledger->find(QuotaSubject::kKey, id.data(), tag, now, ref));
        EXPECT_EQ(ledger->charge(QuotaSubject::kKey, id.data(), ref, tag, units, 100, true, now, &after),
                  QuotaLedger::Charge::kCharged);
    };
    charged(path, 5);
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now), 5u);
    // removed while the edge's workers still count in it: what was read stays
    ASSERT_EQ(::unlink(path.c_str()), 0);
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now), 5u);
    // another file there (the edge made it anew, a restore): read from it
    charged(dir.sub("other.ledger"), 7);
    ASSERT_EQ(::rename(dir.sub("other.ledger").c_str(), path.c_str()), 0);
    EXPECT_EQ(source->used(QuotaSubject::kKey, id, KA_QUOTA_MONTH, now), 7u);
}

TEST_P(PlansQuotaTest, SetPlanGivesThePlansValuesAndAnUnknownPlanWritesNothing) {
    const Id id = alice.account.id;
    // an account made with an entitlement keeps it as its own; the rest follows a plan
    EXPECT_EQ(effective(id).max_keys, KA_DEFAULT_MAX_KEYS);
    const size_t events = audit_count(id);
    try {
        store.set_plan(id, std::string("no-such-plan"));
        ADD_FAILURE() << "accepted";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound);
        EXPECT_EQ(e.code(), "PLAN_NOT_FOUND");
    }
    EXPECT_EQ(audit_count(id), events);
    EXPECT_TRUE(store.find_account(id)->record.plan_id.empty());

    store.set_plan(id, std::string("basic-1k"));
    Entitlements e = effective(id);
    EXPECT_EQ(e.rate_rpm, 100u);  // its own entitlement wins
    EXPECT_EQ(e.max_keys, 5u);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_MONTH, 1000}));
    auto trail = store.list_audit(id, 1, std::nullopt).events;
    ASSERT_EQ(trail.size(), 1u);
    EXPECT_EQ(trail[0].action, "account.set_plan");

    // override the quota, then follow the plan again
    AccountChanges own;
    own.quota = Quota{KA_QUOTA_DAY, 50};
    store.update_account(id, own);
    EXPECT_EQ(effective(id).quota, (Quota{KA_QUOTA_DAY, 50}));
    AccountChanges follow;
    follow.follow_plan = KA_OVERRIDE_QUOTA | KA_OVERRIDE_RATE;
    store.update_account(id, follow);
    e = effective(id);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_MONTH, 1000}));
    EXPECT_EQ(e.rate_rpm, 120u);
    EXPECT_EQ(audit_count(id), events + 3);

    // none: the account's own values again
    store.set_plan(id, std::nullopt);
    e = effective(id);
    EXPECT_EQ(e.max_keys, KA_DEFAULT_MAX_KEYS);
    EXPECT_TRUE(e.quota.none());
    EXPECT_EQ(e.rate_rpm, 100u);
}

TEST_P(PlansQuotaTest, ACreateOnAPlanFollowsItAndItsCapStopsTheSecondKey) {
    AccountChanges c;
    c.plan_id = "trial-100";
    CreatedAccount carol = store.create_account("carol", 0, c);
    Entitlements e = effective(carol.account.id);
    EXPECT_EQ(e.rate_rpm, 60u);
    EXPECT_EQ(e.max_keys, 1u);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_MONTH, 100}));
    // the key's effective rate is capped at the plan's
    HttpResponse r = qcall("POST", "/v1/keys", carol, key_body().dump());
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(parsed(r)["rateLimitPerMinute"], 60);
    r = qcall("POST", "/v1/keys", carol, key_body().dump());
    EXPECT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(parsed(r)["error"]["code"], "KEY_LIMIT_REACHED");
    // a catalog that raises the plan's cap applies to the next create
    std::string text = seed_text();
    const std::string one = R"("maxKeys": 1)";
    text.replace(text.find(one), one.size(), R"("maxKeys": 2)");
    store.import_plans(parse_catalog(text));
    EXPECT_EQ(qcall("POST", "/v1/keys", carol, key_body().dump()).status, 201);
    // an explicit value is the account's own
    AccountChanges mine;
    mine.plan_id = "trial-100";
    mine.max_keys = 7;
    CreatedAccount dave = store.create_account("dave", 30, mine);
    e = effective(dave.account.id);
    EXPECT_EQ(e.max_keys, 7u);
    EXPECT_EQ(e.rate_rpm, 30u);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_MONTH, 100}));
    // a plan that states no rate needs an entitlement
    AccountChanges top;
    top.plan_id = "unlimited";
    EXPECT_EQ(invalid_field([&] { store.create_account("erin", 0, top); }), "entitlement");
    top.plan_id = "nope";
    EXPECT_EQ(invalid_field([&] { store.create_account("erin", 10, top); }), "kind 1");
}

TEST_P(PlansQuotaTest, BadAccountQuotasAreRefusedAndWriteNothing) {
    const Id id = alice.account.id;
    const size_t events = audit_count(id);
    for (Quota q : {Quota{KA_QUOTA_TOTAL, 10}, Quota{KA_QUOTA_DAY, 0}, Quota{KA_QUOTA_MONTH, KA_QUOTA_UNITS_MAX + 1},
                    Quota{9, 10}}) {
        AccountChanges c;
        c.quota = q;
        EXPECT_EQ(invalid_field([&] { store.update_account(id, c); }), "quota");
        EXPECT_EQ(invalid_field([&] { store.create_account("x", 10, c); }), "quota");
    }
    AccountChanges both;
    both.quota = Quota{KA_QUOTA_DAY, 5};
    both.follow_plan = KA_OVERRIDE_QUOTA;
    EXPECT_EQ(invalid_field([&] { store.update_account(id, both); }), "body");
    EXPECT_EQ(audit_count(id), events);
    EXPECT_EQ(store.list_accounts().size(), 2u);
    std::string why;
    EXPECT_FALSE(quota_from_text("5/total", QuotaOwner::kAccountOrPlan, why));
    EXPECT_FALSE(quota_from_text("0/day", QuotaOwner::kKey, why));
    EXPECT_FALSE(quota_from_text("-1/day", QuotaOwner::kKey, why));
    EXPECT_FALSE(quota_from_text("9007199254740993/day", QuotaOwner::kKey, why));
    EXPECT_FALSE(quota_from_text("5/week", QuotaOwner::kKey, why));
    EXPECT_FALSE(quota_from_text("5", QuotaOwner::kKey, why));
    EXPECT_EQ(quota_from_text("5/total", QuotaOwner::kKey, why), (Quota{KA_QUOTA_TOTAL, 5}));
    EXPECT_EQ(quota_from_text("none", QuotaOwner::kAccountOrPlan, why), Quota{});
}

TEST_P(PlansQuotaTest, AKeyQuotaRoundTripsAndARollSharesItsChainsUse) {
    json body = key_body();
    body["quota"] = {{"units", 10}, {"period", "total"}};
    HttpResponse r = qcall("POST", "/v1/keys", alice, body.dump());
    ASSERT_EQ(r.status, 201) << r.body;
    json k = parsed(r);
    EXPECT_EQ(k["quota"], json::parse(R"({"units":10,"period":"total","used":0,"remaining":10,"resetsAt":null})"));
    const std::string id = k["id"];
    Id key_id{};
    ASSERT_TRUE(parse_id(kKeyIdPrefix, id, key_id));
    usage.counts[{QuotaSubject::kKey, key_id}] = 12;  // a metered call overshot

    r = qcall("PATCH", "/v1/keys/" + id, alice, R"({"quota":{"units":1000,"period":"day"}})");
    ASSERT_EQ(r.status, 200) << r.body;
    k = parsed(r);
    EXPECT_EQ(k["quota"]["used"], 12);
    EXPECT_EQ(k["quota"]["remaining"], 988);
    EXPECT_EQ(k["quota"]["resetsAt"], "2027-01-16T00:00:00.000Z");

    r = qcall("PATCH", "/v1/keys/" + id, alice, R"({"quota":{"units":10,"period":"month"}})");
    EXPECT_EQ(parsed(r)["quota"]["remaining"], -2);
    EXPECT_EQ(parsed(r)["quota"]["resetsAt"], "2027-02-01T00:00:00.000Z");

    // the successor keeps the quota and is counted under the chain's first key
    r = qcall("POST", "/v1/keys/" + id + "/roll", alice, "");
    ASSERT_EQ(r.status, 201) << r.body;
    json next = parsed(r);
    EXPECT_EQ(next["quota"]["units"], 10);
    EXPECT_EQ(next["quota"]["used"], 12);
    r = qcall("POST", "/v1/keys/" + next["id"].get<std::string>() + "/roll", alice, "");
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(parsed(r)["quota"]["used"], 12);
    EXPECT_EQ(usage.asked.back(), key_id);

    // null removes it
    r = qcall("PATCH", "/v1/keys/" + next["id"].get<std::string>(), alice, R"({"quota":null})");
    // (the rolled predecessor may still be patched in its grace; here it was revoked)
    EXPECT_EQ(r.status, 409) << r.body;
    r = qcall("PATCH", "/v1/keys/" + parsed(qcall("POST", "/v1/keys", alice, body.dump()))["id"].get<std::string>(),
              alice, R"({"quota":null})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(parsed(r)["quota"].is_null());
}

TEST_P(PlansQuotaTest, BadKeyQuotasAre400AndWriteNothing) {
    HttpResponse made = qcall("POST", "/v1/keys", alice, key_body().dump());
    ASSERT_EQ(made.status, 201);
    const std::string id = parsed(made)["id"];
    const size_t events = audit_count(alice.account.id);
    const std::pair<const char *, const char *> bad[] = {
        {R"({"units":0,"period":"day"})", "quota.units"},
        {R"({"units":-1,"period":"day"})", "quota.units"},
        {R"({"units":9007199254740993,"period":"day"})", "quota.units"},
        {R"({"units":1e3,"period":"day"})", "quota.units"},
        {R"({"units":10,"period":"week"})", "quota.period"},
        {R"({"units":10,"period":"Day"})", "quota.period"},
        {R"({"units":10})", "quota.period"},
        {R"({"period":"day"})", "quota.units"},
        {R"({"units":10,"period":"day","x":1})", "quota.x"},
        {R"("10/day")", "quota"},
    };
    for (const auto &[quota, field] : bad) {
        json body = key_body();
        body["quota"] = json::parse(quota);
        HttpResponse r = qcall("POST", "/v1/keys", alice, body.dump());
        EXPECT_EQ(r.status, 400) << quota;
        EXPECT_EQ(parsed(r)["error"]["code"], "VALIDATION_ERROR");
        EXPECT_EQ(field_of(r), field) << r.body;
        r = qcall("PATCH", "/v1/keys/" + id, alice, json{{"quota", json::parse(quota)}}.dump());
        EXPECT_EQ(r.status, 400) << quota;
        EXPECT_EQ(field_of(r), field) << r.body;
    }
    EXPECT_EQ(audit_count(alice.account.id), events);
    EXPECT_EQ(store.list_keys(alice.account.id, 100, std::nullopt).keys.size(), 1u);
    Id key_id{};
    ASSERT_TRUE(parse_id(kKeyIdPrefix, id, key_id));
    EXPECT_TRUE(store.find_key(key_id)->quota.none());
}

// A source that cannot be read (etcd down) never fails an answer: a new
// key's secret is still given, its quota's use shown as unknown.
class BrokenQuotaUsage : public QuotaUsageSource {
public:
    uint64_t used(QuotaSubject, const Id &, uint8_t, int64_t) override {
        throw StoreError(StoreError::Kind::kUnavailable, "", "etcd is down");
    }
};

TEST_P(PlansQuotaTest, AnUnreadableQuotaSourceNeverLosesASecret) {
    BrokenQuotaUsage broken;
    ConsoleApi api_down{store, nullptr, &broken};
    json body = key_body();
    body["quota"] = {{"units", 10}, {"period", "day"}};
    HttpResponse r = api_down.handle(request("POST", "/v1/keys", &alice, body.dump()));
    ASSERT_EQ(r.status, 201) << r.body;
    json k = parsed(r);
    EXPECT_TRUE(k.contains("secret"));
    EXPECT_TRUE(k["quota"]["used"].is_null());
    EXPECT_TRUE(k["quota"]["remaining"].is_null());
    EXPECT_EQ(k["quota"]["units"], 10);
}

TEST_P(PlansQuotaTest, GetAccountShowsThePlanTheEffectiveValuesAndTheQuotasUse) {
    HttpResponse r = qcall("GET", "/v1/account", alice);
    ASSERT_EQ(r.status, 200) << r.body;
    json a = parsed(r);
    EXPECT_TRUE(a["planId"].is_null());
    EXPECT_EQ(a["rateLimitPerMinute"], 100);
    EXPECT_TRUE(a["quota"].is_null());

    store.set_plan(alice.account.id, std::string("basic-1k"));
    usage.counts[{QuotaSubject::kAccount, alice.account.id}] = 7;
    a = parsed(qcall("GET", "/v1/account", alice));
    EXPECT_EQ(a["id"], id_to_string(kAccountIdPrefix, alice.account.id));
    EXPECT_EQ(a["planId"], "basic-1k");
    EXPECT_EQ(a["maxKeys"], 5);
    EXPECT_EQ(a["rateLimitPerMinute"], 100);
    EXPECT_EQ(a["overrides"], json::parse(R"(["rateLimitPerMinute"])"));
    EXPECT_EQ(a["quota"], json::parse(R"({"units":1000,"period":"month","used":7,"remaining":993,
                                          "resetsAt":"2027-02-01T00:00:00.000Z"})"));
    EXPECT_TRUE(a["allowedScopes"].is_null());
    EXPECT_EQ(a["status"], "active");
    EXPECT_EQ(qcall("POST", "/v1/account", alice).status, 405);
    EXPECT_EQ(call("GET", "/v1/account", nullptr).status, 401);
}

INSTANTIATE_TEST_SUITE_P(Backends, PlansQuotaTest, kBothBackends, backend_name);

// The key cap read from the plan is guarded like the account record: a
// catalog import that lowers the plan's maxKeys between a create's reads
// and its apply makes the create compute again, and refuse.
TEST(PlanGuard, APlanChangedUnderAKeyCreateIsReadAgain) {
    const std::string prefix = "/plan-guard-test/" + std::to_string(::getpid());
    Store other(etcd_backend_at(prefix));
    const std::string seed = seed_text();
    std::string two = seed, one = seed;
    const std::string trial_cap = R"("maxKeys": 1)";
    two.replace(two.find(trial_cap), trial_cap.size(), R"("maxKeys": 2)");
    other.import_plans(parse_catalog(two));
    AccountChanges on_trial;
    on_trial.plan_id = "trial-100";
    const Id acc = other.create_account("racer", 0, on_trial).account.id;
    other.create_key(acc, "first", {"ip:read"}, 10);

    bool raced = false;
    Store racing(std::make_unique<RacingBackend>(etcd_backend_at(prefix), [&] {
        other.import_plans(parse_catalog(one));  // the Trial back to 1 key
        raced = true;
    }));
    try {
        racing.create_key(acc, "second", {"ip:read"}, 10);
        ADD_FAILURE() << "a second key was admitted against a cap the catalog had lowered";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.code(), "KEY_LIMIT_REACHED") << e.what();
    }
    EXPECT_TRUE(raced);
    EXPECT_EQ(other.list_keys(acc, 10, std::nullopt).keys.size(), 1u);
}

}  // namespace keyauth::testing
