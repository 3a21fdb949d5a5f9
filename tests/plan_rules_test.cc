// What keeps an account's plan-given limits from turning into "unlimited"
// (issue 44), on both backends: following a plan the account does not have
// is refused (item 6), and a catalog import that drops a plan accounts are on
// is refused, naming them, unless it names the plan each moves to (item 2).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "catalog_json.h"
#include "console_fixture.h"
#include "racing_backend.h"

namespace keyauth::testing {
namespace {

std::string seed_text() {
    std::ifstream in("lmdb_schema/plans.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The seed catalog without the plan `id`.
std::vector<PlanRecord> seed_without(const std::string &id) {
    auto plans = parse_catalog(seed_text());
    plans.erase(std::remove_if(plans.begin(), plans.end(), [&](const PlanRecord &p) { return p.id == id; }),
                plans.end());
    return plans;
}

// The StoreError a write throws (code "accepted" if none).
template <class Fn>
StoreError refusal(Fn &&fn) {
    try {
        fn();
    } catch (const StoreError &e) {
        return e;
    }
    return StoreError(StoreError::Kind::kCorrupt, "", "accepted", "accepted");
}

class PlanRulesTest : public ConsoleApiTest {
protected:
    void SetUp() override { store.import_plans(parse_catalog(seed_text())); }

    Entitlements effective(const Id &id) { return store.find_account_on_plan(id)->effective; }
    size_t audit_count(const Id &id) { return store.list_audit(id, 1000, std::nullopt).events.size(); }
    size_t all_events() { return store.list_audit(std::nullopt, 1000, std::nullopt).events.size(); }
    Id on_plan(const std::string &name, const std::string &plan, std::optional<uint32_t> max_keys = std::nullopt) {
        AccountChanges c;
        c.plan_id = plan;
        c.max_keys = max_keys;
        return store.create_account(name, 0, c).account.id;
    }
};

}  // namespace

// Item 6: "--quota plan" on an account with no plan used to clear its own
// quota (audit quota -> null) and leave it unlimited; "--max-keys plan" put
// it back to 100 keys. Each is refused, 409-able, and writes nothing.
TEST_P(PlanRulesTest, FollowingAPlanTheAccountDoesNotHaveIsRefusedAndWritesNothing) {
    const Id id = alice.account.id;
    AccountChanges own;
    own.quota = Quota{KA_QUOTA_DAY, 50};
    own.max_keys = 2;
    store.update_account(id, own);
    const size_t events = audit_count(id);
    for (uint8_t bit : {KA_OVERRIDE_QUOTA, KA_OVERRIDE_MAX_KEYS, KA_OVERRIDE_RATE}) {
        AccountChanges follow;
        follow.follow_plan = bit;
        StoreError e = refusal([&] { store.update_account(id, follow); });
        EXPECT_EQ(e.kind(), StoreError::Kind::kConflict) << int(bit) << ": " << e.what();
        EXPECT_EQ(e.code(), "ACCOUNT_HAS_NO_PLAN") << e.what();
    }
    EXPECT_EQ(audit_count(id), events);
    Entitlements e = effective(id);
    EXPECT_EQ(e.quota, (Quota{KA_QUOTA_DAY, 50}));
    EXPECT_EQ(e.max_keys, 2u);
    EXPECT_EQ(e.rate_rpm, 100u);
    EXPECT_EQ(store.find_account(id)->record.overrides,
              KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA);

    // on a plan, following it is what it was
    store.set_plan(id, std::string("basic-1k"));
    AccountChanges follow;
    follow.follow_plan = KA_OVERRIDE_QUOTA;
    store.update_account(id, follow);
    EXPECT_EQ(effective(id).quota, (Quota{KA_QUOTA_MONTH, 1000}));
}

// Item 2: an import that dropped a plan left its accounts on a plan the
// catalog no longer holds, so their own values applied: no quota, unlimited.
TEST_P(PlanRulesTest, ACatalogThatDropsAPlanInUseIsRefusedNamingItsAccounts) {
    std::vector<Id> starters;
    for (int i = 0; i < 7; i++) starters.push_back(on_plan("starter" + std::to_string(i), "starter-500"));
    const size_t events = all_events();
    StoreError e = refusal([&] { store.import_plans(seed_without("starter-500")); });
    EXPECT_EQ(e.kind(), StoreError::Kind::kConflict) << e.what();
    EXPECT_EQ(e.code(), "PLAN_IN_USE");
    const std::string what = e.what();
    EXPECT_NE(what.find("plan \"starter-500\" is in use by 7 accounts"), std::string::npos) << what;
    EXPECT_NE(what.find(id_to_string(kAccountIdPrefix, starters[0])), std::string::npos) << what;
    EXPECT_NE(what.find("and 2 more"), std::string::npos) << what;
    // nothing was written: the plan, its accounts' quota, the trail
    EXPECT_TRUE(store.find_plan("starter-500"));
    EXPECT_EQ(effective(starters[6]).quota, (Quota{KA_QUOTA_MONTH, 500}));
    EXPECT_EQ(all_events(), events);
    // a plan no account is on goes as before
    store.import_plans(seed_without("pro-10k"));
    EXPECT_FALSE(store.find_plan("pro-10k"));
}

TEST_P(PlanRulesTest, ARetiredPlansAccountsMoveToTheNamedPlanInTheSameWrite) {
    const Id carol = on_plan("carol", "starter-500");
    const Id dave = on_plan("dave", "starter-500", 7);  // a cap of its own stays its own
    const Id erin = on_plan("erin", "trial-100");
    const auto without = seed_without("starter-500");
    const size_t events = all_events();
    // the plan they move to must be in the catalog, and the one retired must leave it
    for (const PlanRetirements &bad : {PlanRetirements{{"starter-500", "no-such-plan"}},
                                       PlanRetirements{{"basic-1k", "plus-5k"}, {"starter-500", "basic-1k"}}}) {
        StoreError e = refusal([&] { store.import_plans(without, {}, bad); });
        EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid) << e.what();
        EXPECT_EQ(e.field(), "retire") << e.what();
    }
    EXPECT_EQ(all_events(), events);

    CatalogImport done = store.import_plans(without, {}, {{"starter-500", "basic-1k"}});
    EXPECT_EQ(done.moved, (std::map<std::string, size_t>{{"starter-500", 2}}));
    EXPECT_FALSE(store.find_plan("starter-500"));
    EXPECT_EQ(store.find_account(carol)->record.plan_id, "basic-1k");
    EXPECT_EQ(effective(carol).quota, (Quota{KA_QUOTA_MONTH, 1000}));
    EXPECT_EQ(effective(carol).max_keys, 5u);
    EXPECT_EQ(effective(dave).max_keys, 7u);
    EXPECT_EQ(store.find_account(erin)->record.plan_id, "trial-100");
    // one event per change: each account's own set_plan, in its trail, and the import
    auto trail = store.list_audit(carol, 10, std::nullopt).events;
    ASSERT_FALSE(trail.empty());
    EXPECT_EQ(trail[0].action, "account.set_plan");
    EXPECT_EQ(trail[0].changes["planId"], json::parse(R"({"from":"starter-500","to":"basic-1k"})"));
    EXPECT_EQ(all_events(), events + 3);
    bool seen = false;
    for (const auto &ev : store.list_audit(std::nullopt, 3, std::nullopt).events) {
        if (ev.action != "plans.import") continue;
        seen = true;
        const json changes = ev.changes;  // a copy: a missing field reads null, it does not assert
        EXPECT_EQ(changes.value("retired", json())["to"], json::parse(R"({"starter-500":"basic-1k"})"));
        EXPECT_EQ(changes.value("movedAccounts", json())["to"], 2);
    }
    EXPECT_TRUE(seen);
    // the same import again (a retry after a lost answer) moves nothing more
    EXPECT_TRUE(store.import_plans(without, {}, {{"starter-500", "basic-1k"}}).moved.empty());
    EXPECT_EQ(audit_count(carol), trail.size());
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanRulesTest, kBothBackends, backend_name);

// An account put on the plan between an import's reads and its apply (etcd:
// another keyauthd, another keyauthctl) is seen: the import reads again and
// refuses, rather than leave the account on a plan it drops.
TEST(PlanRetirementGuard, AnAccountPutOnTheDroppedPlanMeanwhileIsSeen) {
    const std::string prefix = "/plan-retire-test/" + std::to_string(::getpid());
    Store other(etcd_backend_at(prefix));
    other.import_plans(parse_catalog(seed_text()));
    const Id late = other.create_account("late", 10).account.id;
    bool raced = false;
    Store racing(std::make_unique<RacingBackend>(etcd_backend_at(prefix), [&] {
        other.set_plan(late, std::string("starter-500"));
        raced = true;
    }));
    StoreError e = refusal([&] { racing.import_plans(seed_without("starter-500")); });
    EXPECT_TRUE(raced);
    EXPECT_EQ(e.code(), "PLAN_IN_USE") << e.what();
    EXPECT_TRUE(other.find_plan("starter-500"));
    EXPECT_EQ(other.find_account(late)->record.plan_id, "starter-500");
}

}  // namespace keyauth::testing
