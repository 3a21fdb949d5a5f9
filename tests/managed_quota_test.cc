// A key quota an operator set is managed (issue 44, item 5), on both
// backends: credits sold through keyauthctl (and the admin API) cannot be
// raised, moved to another period or removed from the console (403
// QUOTA_MANAGED), and may only be lowered there; a budget the console set
// itself stays the console's. The mark is the key record's (layout 4) and
// goes along with a roll.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "console_fixture.h"

namespace keyauth::testing {
namespace {

class ManagedQuotaTest : public ConsoleApiTest {
protected:
    const Actor op = Actor::operator_named("sales");

    // A key made by the operator, as keyauthctl key create --quota makes it.
    std::string sold(const Quota &q) {
        KeySpec spec{"sold", {"ip:read"}, 60, std::nullopt, q};
        return id_to_string(kKeyIdPrefix, store.create_key(alice.account.id, spec, op).key.key_id);
    }
    HttpResponse patch(const std::string &id, const std::string &body) {
        return call("PATCH", "/v1/keys/" + id, &alice, body);
    }
    KeyRecord record(const std::string &id) {
        Id key{};
        EXPECT_TRUE(parse_id(kKeyIdPrefix, id, key));
        return *store.find_key(key);
    }
    size_t audit_count() { return store.list_audit(alice.account.id, 1000, std::nullopt).events.size(); }
    static std::string code(const HttpResponse &r) {
        const json j = parsed(r);
        return j.contains("error") ? j["error"].value("code", "") : "";
    }
};

}  // namespace

TEST_P(ManagedQuotaTest, TheConsoleCannotLiftAQuotaTheOperatorSold) {
    const std::string id = sold(Quota{KA_QUOTA_TOTAL, 2});
    EXPECT_EQ(parsed(call("GET", "/v1/keys/" + id, &alice))["quotaManaged"], true);
    const size_t events = audit_count();
    for (const char *lift : {R"({"quota":null})", R"({"quota":{"units":3,"period":"total"}})",
                             R"({"quota":{"units":2,"period":"month"}})", R"({"quota":{"units":1,"period":"day"}})",
                             R"({"name":"renamed","quota":null})"}) {
        HttpResponse r = patch(id, lift);
        EXPECT_EQ(r.status, 403) << lift << ": " << r.body;
        EXPECT_EQ(code(r), "QUOTA_MANAGED") << lift;
        EXPECT_EQ(parsed(r).value("error", json::object()).value("field", ""), "quota") << r.body;
    }
    EXPECT_EQ(record(id).quota, (Quota{KA_QUOTA_TOTAL, 2}));
    EXPECT_EQ(record(id).name, "sold");
    EXPECT_EQ(audit_count(), events);

    // what the console may do: the same quota, other fields, and a lower one (still managed)
    EXPECT_EQ(patch(id, R"({"quota":{"units":2,"period":"total"}})").status, 200);
    EXPECT_EQ(audit_count(), events);
    EXPECT_EQ(patch(id, R"({"name":"mine"})").status, 200);
    HttpResponse r = patch(id, R"({"quota":{"units":1,"period":"total"}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(parsed(r)["quota"]["units"], 1);
    EXPECT_EQ(parsed(r)["quotaManaged"], true);
    EXPECT_EQ(code(patch(id, R"({"quota":{"units":2,"period":"total"}})")), "QUOTA_MANAGED")
        << "lowered is what was sold now";

    // a roll's successor carries the quota and the mark
    r = call("POST", "/v1/keys/" + id + "/roll", &alice, "");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string next = parsed(r)["id"];
    EXPECT_EQ(parsed(r)["quotaManaged"], true);
    EXPECT_TRUE(record(next).quota_managed);
    EXPECT_EQ(code(patch(next, R"({"quota":null})")), "QUOTA_MANAGED");

    // the operator may do anything; removing the quota clears the mark
    KeyChanges more;
    more.quota = Quota{KA_QUOTA_TOTAL, 500};
    EXPECT_TRUE(store.update_key(std::nullopt, record(next).key_id, more, op).quota_managed);
    KeyChanges none;
    none.quota = Quota{};
    EXPECT_FALSE(store.update_key(std::nullopt, record(next).key_id, none, op).quota_managed);
    r = patch(next, R"({"quota":{"units":10,"period":"day"}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(parsed(r)["quotaManaged"], false);
}

TEST_P(ManagedQuotaTest, ABudgetTheConsoleSetStaysTheConsolesUntilAnOperatorSetsOne) {
    HttpResponse r = create(alice, R"({"name":"k","scopes":["ip:read"],"rateLimitPerMinute":60,
                                       "quota":{"units":5,"period":"day"}})");
    ASSERT_EQ(r.status, 201) << r.body;
    const std::string id = parsed(r)["id"];
    EXPECT_EQ(parsed(r)["quotaManaged"], false);
    r = patch(id, R"({"quota":{"units":50,"period":"month"}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(parsed(r)["quotaManaged"], false);
    r = patch(id, R"({"quota":null})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(parsed(r)["quota"].is_null());
    EXPECT_EQ(parsed(r)["quotaManaged"], false);

    // the operator setting the console's very budget takes it over: one event says so
    EXPECT_EQ(patch(id, R"({"quota":{"units":5,"period":"day"}})").status, 200);
    const size_t events = audit_count();
    KeyChanges same;
    same.quota = Quota{KA_QUOTA_DAY, 5};
    EXPECT_TRUE(store.update_key(alice.account.id, record(id).key_id, same, op).quota_managed);
    auto trail = store.list_audit(alice.account.id, 1, std::nullopt).events;
    EXPECT_EQ(audit_count(), events + 1);
    EXPECT_EQ(trail[0].changes["quotaManaged"], json::parse(R"({"from":false,"to":true})"));
    EXPECT_EQ(code(patch(id, R"({"quota":{"units":6,"period":"day"}})")), "QUOTA_MANAGED");
}

INSTANTIATE_TEST_SUITE_P(Backends, ManagedQuotaTest, kBothBackends, backend_name);

}  // namespace keyauth::testing
