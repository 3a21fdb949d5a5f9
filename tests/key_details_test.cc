// ka_edge_key_details (issue 48): what an accepted key's variables and the
// verify answer tell beyond the verdict (the key's name and meta, its
// account's meta and plan id), read afresh by id from a store the real
// Store wrote, into a buffer the caller gives and nothing past it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "edge_over_store.h"
#include "key_format.h"
#include "keyauth_core.h"
#include "store.h"

using namespace keyauth;

namespace {

const std::string kLongestPlan(KA_PLAN_ID_MAX_LEN, 'p');

// A JSON object whose compact text is `bytes` long: {"p":"xx…x"}.
std::string meta_of(size_t bytes, char fill) { return "{\"p\":\"" + std::string(bytes - 8, fill) + "\"}"; }

PlanRecord plan(const std::string &id, int32_t order, bool popular) {
    PlanRecord p;
    p.id = id;
    p.name = "Plan " + std::to_string(order);
    p.price_paise = 19900;
    p.features = {"ip:read"};
    p.popular = popular;
    p.sort_order = order;
    return p;  // entitles nothing: the accounts' own values apply
}

std::string text(ka_str_t s) { return std::string(s.data, s.len); }

class KeyDetailsTest : public keyauth::testing::EdgeOverStore {
protected:
    void SetUp() override {
        EdgeOverStore::SetUp();
        store.import_plans({plan("starter", 1, true), plan(kLongestPlan, 2, false)});
    }
    // plan, meta: "" for none
    Id account(const std::string &plan_id, const std::string &meta) {
        AccountChanges c;
        if (!plan_id.empty()) c.plan_id = plan_id;
        c.meta = meta;
        return store.create_account("acme", 600, c).account.id;
    }
    CreatedKey key(const Id &acc, const std::string &name, const std::string &meta) {
        KeySpec spec{name, {"ip:read"}, 100, std::nullopt, {}};
        spec.meta = meta;
        return store.create_key(acc, spec);
    }
    ka_auth_result_t accepted(const CreatedKey &k) {
        ka_auth_result_t r = check(k.secret);
        EXPECT_EQ(r.verdict, KA_AUTH_OK) << r.reason;
        return r;
    }

    char buf[KA_KEY_DETAILS_MAX];
    ka_key_details_t d;
    int details(const ka_auth_result_t &r) { return ka_edge_key_details(edge, &r, buf, sizeof buf, &d); }
};

}  // namespace

TEST_F(KeyDetailsTest, AnAcceptedKeyTellsItsNameAndMetaAndItsAccountsMetaAndPlan) {
    const Id acc = account("starter", R"({"crm":"c-1"})");
    const CreatedKey k = key(acc, "office", R"({"tier":"gold"})");
    const ka_auth_result_t r = accepted(k);
    ASSERT_EQ(details(r), 1);
    EXPECT_EQ(text(d.key_name), "office");
    EXPECT_EQ(text(d.key_meta), R"({"tier":"gold"})");
    EXPECT_EQ(text(d.plan_id), "starter");
    EXPECT_EQ(text(d.account_meta), R"({"crm":"c-1"})");

    // read afresh: what changed since the check is what it tells
    KeyChanges kc;
    kc.meta = R"({"tier":"silver"})";
    store.update_key(acc, k.key.key_id, kc);
    AccountChanges ac;
    ac.meta = "";
    store.update_account(acc, ac);
    store.set_plan(acc, kLongestPlan);
    ASSERT_EQ(details(r), 1);
    EXPECT_EQ(text(d.key_meta), R"({"tier":"silver"})");
    EXPECT_EQ(text(d.plan_id), kLongestPlan);
    EXPECT_EQ(d.account_meta.len, 0u);
}

TEST_F(KeyDetailsTest, WhatAKeyOrItsAccountHasNotIsEmpty) {
    const CreatedKey plain = key(account("starter", R"({"crm":"c-2"})"), "plain", "");
    ASSERT_EQ(details(accepted(plain)), 1);
    EXPECT_EQ(text(d.key_name), "plain");
    EXPECT_EQ(d.key_meta.len, 0u);
    EXPECT_EQ(text(d.plan_id), "starter");
    EXPECT_EQ(text(d.account_meta), R"({"crm":"c-2"})");

    const CreatedKey bare = key(account("", ""), "bare", R"({"a":1})");
    ASSERT_EQ(details(accepted(bare)), 1);
    EXPECT_EQ(text(d.key_name), "bare");
    EXPECT_EQ(text(d.key_meta), R"({"a":1})");
    EXPECT_EQ(d.plan_id.len, 0u) << "on no plan";
    EXPECT_EQ(d.account_meta.len, 0u);
}

TEST_F(KeyDetailsTest, NothingForACheckThatFoundNoKey) {
    const CreatedKey k = key(account("starter", "{}"), "office", "{}");
    ka_auth_result_t unknown = check(generate_secret(kKeyPrefix));
    ASSERT_EQ(unknown.found, 0);
    EXPECT_EQ(details(unknown), 0);
    EXPECT_EQ(d.key_name.len, 0u);
    ka_auth_result_t none = check("");
    ASSERT_EQ(none.verdict, KA_AUTH_KEY_REQUIRED);
    EXPECT_EQ(details(none), 0);
    // a key found, but no edge or no buffer to read it with
    const ka_auth_result_t r = accepted(k);
    EXPECT_EQ(ka_edge_key_details(nullptr, &r, buf, sizeof buf, &d), 0);
    EXPECT_EQ(ka_edge_key_details(edge, &r, nullptr, sizeof buf, &d), 0);
    EXPECT_EQ(ka_edge_key_details(edge, nullptr, buf, sizeof buf, &d), 0);
    EXPECT_EQ(details(r), 1) << "{} is a meta like any other";
    EXPECT_EQ(text(d.key_meta), "{}");
}

TEST_F(KeyDetailsTest, NothingOnceTheKeyOrItsAccountIsGoneSinceTheCheck) {
    const CreatedKey gone = key(account("starter", R"({"crm":"c-3"})"), "gone", R"({"t":1})");
    const ka_auth_result_t r = accepted(gone);
    erase_behind_store(key_records(), gone.key.key_id.data(), KA_ID_LEN);
    EXPECT_EQ(details(r), 0);

    const Id orphaned = account("starter", R"({"crm":"c-4"})");
    const CreatedKey k = key(orphaned, "orphan", R"({"t":2})");
    const ka_auth_result_t r2 = accepted(k);
    ASSERT_EQ(details(r2), 1);
    erase_behind_store(accounts(), orphaned.data(), KA_ID_LEN);
    EXPECT_EQ(details(r2), 0);
}

// Every length short of what the four take: 0, and not a byte written at
// or past the length given (the guard bytes after it stay as they were).
TEST_F(KeyDetailsTest, AShortBufferGetsNothingAndNothingIsWrittenPastIt) {
    const std::string key_meta = R"({"tier":"gold"})", account_meta = R"({"crm":"c-5"})";
    const CreatedKey k = key(account("starter", account_meta), "office", key_meta);
    const ka_auth_result_t r = accepted(k);
    const size_t need = std::string("office").size() + key_meta.size() + std::string("starter").size() +
                        account_meta.size();
    std::vector<char> mem(need + 64);
    auto untouched_from = [&](size_t at) {
        for (size_t i = at; i < mem.size(); i++)
            if (mem[i] != '\x5a') return false;
        return true;
    };
    for (size_t len = 0; len < need; len++) {
        std::fill(mem.begin(), mem.end(), '\x5a');
        EXPECT_EQ(ka_edge_key_details(edge, &r, mem.data(), len, &d), 0) << len << " bytes";
        EXPECT_TRUE(untouched_from(len)) << "written past " << len << " bytes";
    }
    std::fill(mem.begin(), mem.end(), '\x5a');
    ASSERT_EQ(ka_edge_key_details(edge, &r, mem.data(), need, &d), 1);
    EXPECT_TRUE(untouched_from(need));
    EXPECT_EQ(text(d.key_name) + text(d.key_meta) + text(d.plan_id) + text(d.account_meta),
              "office" + key_meta + "starter" + account_meta);
}

// The longest name, two metas of 1 KiB and the longest plan id take
// KA_KEY_DETAILS_MAX bytes, every one of them.
TEST_F(KeyDetailsTest, TheLongestOfEachFillsKaKeyDetailsMaxExactly) {
    const std::string name(KA_NAME_MAX_LEN, 'n'), key_meta = meta_of(KA_META_MAX_BYTES, 'k'),
        account_meta = meta_of(KA_META_MAX_BYTES, 'a');
    ASSERT_EQ(key_meta.size(), size_t{KA_META_MAX_BYTES});
    const CreatedKey k = key(account(kLongestPlan, account_meta), name, key_meta);
    const ka_auth_result_t r = accepted(k);
    std::vector<char> mem(KA_KEY_DETAILS_MAX + 64, '\x5a');
    EXPECT_EQ(ka_edge_key_details(edge, &r, mem.data(), KA_KEY_DETAILS_MAX - 1, &d), 0);
    ASSERT_EQ(ka_edge_key_details(edge, &r, mem.data(), KA_KEY_DETAILS_MAX, &d), 1);
    EXPECT_EQ(text(d.key_name), name);
    EXPECT_EQ(text(d.key_meta), key_meta);
    EXPECT_EQ(text(d.plan_id), kLongestPlan);
    EXPECT_EQ(text(d.account_meta), account_meta);
    EXPECT_EQ(d.key_name.len + d.key_meta.len + d.plan_id.len + d.account_meta.len, size_t{KA_KEY_DETAILS_MAX});
    EXPECT_EQ(std::string(mem.begin() + KA_KEY_DETAILS_MAX, mem.end()), std::string(64, '\x5a'));
}
