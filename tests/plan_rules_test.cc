// What keeps an account's plan-given limits from turning into "unlimited"
// (issue 44), on both backends: following a plan the account does not have
// is refused (item 6), and a catalog import that drops a plan accounts are on
// is refused, naming them, unless it names the plan each moves to (item 2).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "catalog_json.h"
#include "console_fixture.h"

namespace keyauth::testing {
namespace {

std::string seed_text() {
    std::ifstream in("lmdb_schema/plans.json");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

class PlanRulesTest : public ConsoleApiTest {
protected:
    void SetUp() override { store.import_plans(parse_catalog(seed_text())); }

    Entitlements effective(const Id &id) { return store.find_account_on_plan(id)->effective; }
    size_t audit_count(const Id &id) { return store.list_audit(id, 1000, std::nullopt).events.size(); }

    // The StoreError a write throws ("accepted" if none).
    template <class Fn>
    static StoreError refusal(Fn &&fn) {
        try {
            fn();
        } catch (const StoreError &e) {
            return e;
        }
        return StoreError(StoreError::Kind::kCorrupt, "", "accepted", "accepted");
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

INSTANTIATE_TEST_SUITE_P(Backends, PlanRulesTest, kBothBackends, backend_name);

}  // namespace keyauth::testing
