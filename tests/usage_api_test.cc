// GET /v1/usage against a real store and a real usage env (the buckets an
// edge's collector writes), without HTTP: zero-filled series and totals, by
// account or one key, the range rules, and every bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "console_api.h"
#include "rfc3339.h"
#include "usage_store_fixture.h"

using namespace keyauth;
using nlohmann::json;

namespace {

class UsageApiTest : public keyauth::testing::UsageStoreFixture {
protected:
    ConsoleApi api{store, usage.get()};
    CreatedAccount alice = store.create_account("alice", 100);
    CreatedAccount bob = store.create_account("bob", 100);
    KeyRecord a1 = make_key(alice.account.id), a2 = make_key(alice.account.id), b1 = make_key(bob.account.id);

    HttpResponse get(const std::string &query, const CreatedAccount *who, const std::string &method = "GET") {
        HttpRequest r;
        r.method = method;
        r.path = "/v1/usage";
        r.query = query;
        if (who) {
            r.has_authorization = true;
            r.authorization = "Bearer " + who->console_token;
        }
        return api.handle(r);
    }
    static json parsed(const HttpResponse &r) { return json::parse(r.body); }
    static std::string field_of(const HttpResponse &r) { return parsed(r)["error"].value("field", ""); }
    static json counts(uint64_t a, uint64_t rl, uint64_t q, uint64_t u) {
        return {{"allowed", a}, {"rateLimited", rl}, {"quotaExceeded", q}, {"units", u}};
    }
};

TEST_F(UsageApiTest, HoursZeroFilledWithTotals) {
    count(a1, {5, 1, 0, 5}, kNine + 1000);
    count(a2, {2, 0, 3, 6}, kNine + 1000);
    count(a1, {1, 0, 0, 1}, kNine + 2 * kMsPerHour);
    count(b1, {100, 0, 0, 100}, kNine + 1000);  // bob's, never alice's
    HttpResponse r = get("granularity=hour&from=2026-11-20T08:00:00Z&to=2026-11-20T12:00:00Z", &alice);
    ASSERT_EQ(r.status, 200) << r.body;
    json u = parsed(r);
    EXPECT_EQ(u["granularity"], "hour");
    EXPECT_EQ(u["from"], "2026-11-20T08:00:00.000Z");
    EXPECT_EQ(u["to"], "2026-11-20T12:00:00.000Z");
    EXPECT_TRUE(u["keyId"].is_null());
    ASSERT_EQ(u["series"].size(), 4u);
    EXPECT_EQ(u["series"][0]["start"], "2026-11-20T08:00:00.000Z");
    json zero = counts(0, 0, 0, 0);
    for (const char *f : {"allowed", "rateLimited", "quotaExceeded", "units"}) {
        EXPECT_EQ(u["series"][0][f], zero[f]);
        EXPECT_EQ(u["series"][1][f], counts(7, 1, 3, 11)[f]) << f;
        EXPECT_EQ(u["series"][2][f], zero[f]);
        EXPECT_EQ(u["series"][3][f], counts(1, 0, 0, 1)[f]);
    }
    EXPECT_EQ(u["totals"], counts(8, 1, 3, 12));
    EXPECT_EQ(r.headers.at(0), (std::pair<std::string, std::string>("Cache-Control", "no-store")));

    json one = parsed(get("granularity=hour&from=2026-11-20T09:00:00Z&to=2026-11-20T10:00:00Z&keyId=" +
                              id_to_string(kKeyIdPrefix, a2.key_id),
                          &alice));
    ASSERT_EQ(one["series"].size(), 1u);
    EXPECT_EQ(one["keyId"], id_to_string(kKeyIdPrefix, a2.key_id));
    EXPECT_EQ(one["totals"], counts(2, 0, 3, 6));
}

TEST_F(UsageApiTest, DaysFromDatesAndRounding) {
    count(a1, {5, 0, 0, 5}, kNine);
    count(a1, {1, 0, 0, 1}, kNine + kMsPerDay);
    // a date is its 00:00; from rounds down and to up to whole days
    json u = parsed(get("granularity=day&from=2026-11-20&to=2026-11-21T00:00:01Z", &alice));
    ASSERT_EQ(u["series"].size(), 2u) << u.dump();
    EXPECT_EQ(u["from"], "2026-11-20T00:00:00.000Z");
    EXPECT_EQ(u["to"], "2026-11-22T00:00:00.000Z");
    EXPECT_EQ(u["series"][0]["allowed"], 5);
    EXPECT_EQ(u["series"][1]["allowed"], 1);
    // a date as to includes that whole day; an instant is an exclusive end
    json both = parsed(get("granularity=day&from=2026-11-20&to=2026-11-21", &alice));
    ASSERT_EQ(both["series"].size(), 2u) << both.dump();
    EXPECT_EQ(both["to"], "2026-11-22T00:00:00.000Z") << "the end of the 21st, exclusive";
    EXPECT_EQ(both["totals"]["allowed"], 6);
    json day = parsed(get("granularity=day&from=2026-11-21&to=2026-11-21", &alice));
    ASSERT_EQ(day["series"].size(), 1u) << day.dump();
    EXPECT_EQ(day["totals"]["allowed"], 1) << "from=to=a date: that day";
    json hours = parsed(get("granularity=hour&from=2026-11-20&to=2026-11-20", &alice));
    EXPECT_EQ(hours["series"].size(), 24u) << hours.dump();
    EXPECT_EQ(hours["totals"]["allowed"], 5);
    // offsets are instants like any other
    json h = parsed(get("granularity=hour&from=2026-11-20T14:30:00%2B05:30&to=2026-11-20T15:30:00%2B05:30", &alice));
    ASSERT_EQ(h["series"].size(), 1u) << h.dump();
    EXPECT_EQ(h["series"][0]["start"], "2026-11-20T09:00:00.000Z");
    EXPECT_EQ(h["series"][0]["allowed"], 5);
}

TEST_F(UsageApiTest, DefaultsAreTheLast30DaysOrThe48Hours) {
    json d = parsed(get("", &alice));
    EXPECT_EQ(d["granularity"], "day");
    EXPECT_EQ(d["series"].size(), 30u);
    const int64_t tomorrow = (store.now() / kMsPerDay + 1) * kMsPerDay;
    EXPECT_EQ(d["to"], format_time(tomorrow));
    json h = parsed(get("granularity=hour", &alice));
    EXPECT_EQ(h["series"].size(), 48u);
    // from a few hours ago (a fixed date would pass the 168 hours a read of
    // hours may span once the calendar moved on)
    const std::string five_ago = format_time((store.now() / kMsPerHour - 5) * kMsPerHour);
    json one = parsed(get("granularity=hour&from=" + five_ago, &alice));
    EXPECT_EQ(one["from"], five_ago) << "to defaults to now even with from: " << one.dump();
}

TEST_F(UsageApiTest, KeysOfAnotherAccountAreNotFound) {
    const std::string q = "granularity=day&from=2026-11-20&to=2026-11-21&keyId=";
    HttpResponse r = get(q + id_to_string(kKeyIdPrefix, b1.key_id), &alice);
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(parsed(r)["error"]["code"], "KEY_NOT_FOUND");
    // made at 1970's first millisecond: no key of the fixture has it (b1's id
    // with its last bit flipped was alice's a2 whenever both were made in one
    // millisecond: ids made then follow one another)
    Id unknown = generate_id(1);
    EXPECT_EQ(get(q + id_to_string(kKeyIdPrefix, unknown), &alice).status, 404);
    EXPECT_EQ(get(q + id_to_string(kKeyIdPrefix, b1.key_id), &bob).status, 200);
}

TEST_F(UsageApiTest, BadInputNamesTheField) {
    struct Case { std::string query; const char *field; } cases[] = {
        {"granularity=week", "granularity"},
        {"granularity=", "granularity"},
        {"granularity=day&granularity=hour", "granularity"},
        {"from=yesterday", "from"},
        {"to=2026-13-01", "to"},
        {"from=2026-11-20T09:00:00", "from"},  // no zone: not RFC 3339
        {"from=2026-11-21&to=2026-11-20", "from"},
        {"from=2026-11-20&to=2026-11-20T00:00:00Z", "from"},  // empty: an instant as to is exclusive
        {"to=1970-01-01", "to"},  // from not given: the default 30 days would start in 1969
        {"granularity=hour&from=2026-11-20T00:00:00Z&to=2026-11-27T01:00:00Z", "to"},  // 169 hours
        {"granularity=day&from=2025-01-01&to=2026-02-05", "to"},                        // 401 days
        {"keyId=key_123", "keyId"},
        {"keyId=" + id_to_string(kAccountIdPrefix, alice.account.id), "keyId"},
        {"limit=10", "limit"},
        {"from=%zz", "query"},
    };
    for (const auto &c : cases) {
        HttpResponse r = get(c.query, &alice);
        EXPECT_EQ(r.status, 400) << c.query << ": " << r.body;
        EXPECT_EQ(parsed(r)["error"]["code"], "VALIDATION_ERROR") << c.query;
        EXPECT_EQ(field_of(r), c.field) << c.query;
    }
    // the widest ranges allowed
    EXPECT_EQ(get("granularity=hour&from=2026-11-20T00:00:00Z&to=2026-11-27T00:00:00Z", &alice).status, 200);
    EXPECT_EQ(get("granularity=day&from=2025-01-01&to=2026-02-04", &alice).status, 200);
}

TEST_F(UsageApiTest, TokenAndMethod) {
    EXPECT_EQ(get("", nullptr).status, 401);
    HttpResponse r = get("", &alice, "POST");
    EXPECT_EQ(r.status, 405);
    EXPECT_EQ(r.headers.at(0).second, "GET");
}

// Reads clip to the retention window, whether or not the edge has aged the
// buckets out (an idle edge has not): hours are kept 7 days, days as long
// as the edge keeps them (keyauth_usage_history, recorded in its usage env).
TEST_F(UsageApiTest, ReadsClipToTheRetentionWindow) {
    count(a1, {5, 0, 0, 5}, kNine);
    const std::string hour_q = "granularity=hour&from=2026-11-20T09:00:00Z&to=2026-11-20T10:00:00Z";
    const std::string day_q = "granularity=day&from=2026-11-20&to=2026-11-20";
    store.set_clock([] { return kNine + 7 * kMsPerDay - 1; });
    EXPECT_EQ(parsed(get(hour_q, &alice))["totals"]["allowed"], 5) << "the 168th hour is kept";
    store.set_clock([] { return kNine + 9 * kMsPerDay; });
    EXPECT_EQ(parsed(get(hour_q, &alice))["totals"]["allowed"], 0) << "an hour 9 days old is past its keeping";
    EXPECT_EQ(parsed(get(day_q, &alice))["totals"]["allowed"], 5) << "its day is kept";
    store.set_clock([] { return kNine + 399 * kMsPerDay; });
    EXPECT_EQ(parsed(get(day_q, &alice))["totals"]["allowed"], 5) << "the 400th day is kept";
    store.set_clock([] { return kNine + 404 * kMsPerDay; });
    EXPECT_EQ(parsed(get(day_q, &alice))["totals"]["allowed"], 0) << "a day 404 days old is past its keeping";

    // an edge that keeps 30 days (keyauth_usage_history 30d), or 3660
    std::string err;
    ASSERT_TRUE(UsageEnv::open(dir.sub("db") + KA_USAGE_DIR_SUFFIX, err, 30)) << err;
    store.set_clock([] { return kNine + 31 * kMsPerDay; });
    EXPECT_EQ(parsed(get(day_q, &alice))["totals"]["allowed"], 0) << "past the edge's 30 days";
    ASSERT_TRUE(UsageEnv::open(dir.sub("db") + KA_USAGE_DIR_SUFFIX, err, 3660)) << err;
    store.set_clock([] { return kNine + 404 * kMsPerDay; });
    EXPECT_EQ(parsed(get(day_q, &alice))["totals"]["allowed"], 5) << "within the edge's 3660 days";
}

// No usage env yet (no edge has collected): zeros, never an error.
TEST_F(UsageApiTest, NoUsageYetIsZeros) {
    HttpResponse r = get("granularity=day&from=2026-11-20&to=2026-11-21", &alice);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(parsed(r)["totals"], counts(0, 0, 0, 0));
    EXPECT_EQ(parsed(r)["series"].size(), 2u);
}

}  // namespace
