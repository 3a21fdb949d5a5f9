// A reported secret on both backends (issue 47): a live key of this store is
// revoked (or, with notify, only recorded) with its audit events, its
// key.revoked and key.leaked events and the report the console shows; an
// admin or console token is revoked whatever the action; a revoked secret,
// a secret of no one here and a bad report change nothing.
#include <gtest/gtest.h>

#include "console_fixture.h"
#include "key_format.h"
#include "webhook_records.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::TempDir;

namespace {

const LeakReportOrigin kGithub{"github", "https://github.com/octo/repo/blob/abc/config.env"};

class LeakStoreTest : public ::testing::TestWithParam<Backend> {
protected:
    TempDir dir;
    int64_t now = 1796083200000;  // 2026-12-01T00:00:00Z
    std::unique_ptr<Store> store_ptr = make_store();
    Store &store = *store_ptr;
    const Actor scanner = Actor::secret_scanning("github", "192.0.2.7");

    std::unique_ptr<Store> make_store() {
        auto s = std::make_unique<Store>(keyauth::testing::backend_for(GetParam(), dir));
        s->set_clock([this] { return now; });
        return s;
    }
    std::vector<AuditEvent> audit(const std::optional<Id> &account) {
        return store.list_audit(account, 1000, std::nullopt).events;
    }
    // The types waiting in the outbox, oldest first (no endpoint: drained to nothing).
    size_t outbox() { return store.webhook_queue_gauges().outbox; }
};

}  // namespace

TEST_P(LeakStoreTest, ALiveKeyIsRevokedAuditedAndItsReportKept) {
    CreatedAccount acc = store.create_account("Acme", 600);
    CreatedKey key = store.create_key(acc.account.id, "k", {"ip:read"}, 60);
    CreatedKey other = store.create_key(acc.account.id, "other", {"ip:read"}, 60);
    const size_t events_before = outbox();
    now += 1000;

    LeakOutcome out = store.report_leak(key.secret, LeakAction::kRevoke, kGithub, scanner);
    EXPECT_EQ(out.kind, LeakedSecret::kKey);
    EXPECT_TRUE(out.revoked);
    EXPECT_TRUE(out.recorded);
    EXPECT_EQ(out.account, acc.account.id);
    EXPECT_EQ(out.target, key.key.key_id);

    EXPECT_EQ(store.find_key(key.key.key_id)->status, KA_KEY_REVOKED);
    EXPECT_EQ(store.find_key(key.key.key_id)->revoked_ms, now);
    EXPECT_EQ(store.find_key(other.key.key_id)->status, KA_KEY_ACTIVE) << "only the reported key";

    auto trail = audit(acc.account.id);
    ASSERT_GE(trail.size(), 2u);
    EXPECT_EQ(trail[0].action, "key.leak");
    EXPECT_EQ(trail[1].action, "key.revoke");
    for (int i : {0, 1}) {
        EXPECT_EQ(trail[i].actor.type, Actor::Type::kSecretScanning);
        EXPECT_EQ(trail[i].actor.user, "github");
        EXPECT_EQ(trail[i].target_id, id_to_string(kKeyIdPrefix, key.key.key_id));
    }
    EXPECT_EQ(trail[0].changes["leak"]["to"]["url"], kGithub.url);
    EXPECT_EQ(trail[0].changes["leak"]["to"]["source"], "github");
    const auto shown = audit_to_json(trail[0]);
    EXPECT_EQ(shown["actor"], (nlohmann::json{{"type", "secret_scanning"}, {"source", "github"}}));
    EXPECT_EQ(shown.dump().find(key.secret), std::string::npos) << "no secret in the trail";

    // key.revoked and key.leaked wait in the outbox
    EXPECT_EQ(outbox(), events_before + 2);

    auto leaks = store.key_leaks(acc.account.id);
    ASSERT_EQ(leaks.size(), 1u);
    const KeyLeak &leak = leaks.at(key.key.key_id);
    EXPECT_EQ(leak.at_ms, now);
    EXPECT_EQ(leak.source, "github");
    EXPECT_EQ(leak.url, kGithub.url);
    EXPECT_TRUE(leak.revoked);

    // reported again (GitHub finds it in a second file): nothing more
    now += 1000;
    LeakOutcome again = store.report_leak(key.secret, LeakAction::kRevoke, kGithub, scanner);
    EXPECT_EQ(again.kind, LeakedSecret::kKey);
    EXPECT_FALSE(again.revoked);
    EXPECT_FALSE(again.recorded);
    EXPECT_EQ(audit(acc.account.id).size(), trail.size());
    EXPECT_EQ(outbox(), events_before + 2);
}

TEST_P(LeakStoreTest, NotifyRecordsOnceAndLeavesTheKeyWorking) {
    CreatedAccount acc = store.create_account("Acme", 600);
    CreatedKey key = store.create_key(acc.account.id, "k", {"ip:read"}, 60);
    const size_t trail_before = audit(acc.account.id).size();

    LeakOutcome out = store.report_leak(key.secret, LeakAction::kNotify, kGithub, scanner);
    EXPECT_EQ(out.kind, LeakedSecret::kKey);
    EXPECT_FALSE(out.revoked);
    EXPECT_TRUE(out.recorded);
    EXPECT_EQ(store.find_key(key.key.key_id)->status, KA_KEY_ACTIVE);
    auto trail = audit(acc.account.id);
    ASSERT_EQ(trail.size(), trail_before + 1);
    EXPECT_EQ(trail[0].action, "key.leak");
    EXPECT_FALSE(trail[0].changes.contains("status"));
    EXPECT_FALSE(store.key_leaks(acc.account.id).at(key.key.key_id).revoked);

    // told once: a second notify writes nothing
    EXPECT_FALSE(store.report_leak(key.secret, LeakAction::kNotify, kGithub, scanner).recorded);
    EXPECT_EQ(audit(acc.account.id).size(), trail_before + 1);

    // a later report under revoke stops it, and the report says so
    now += 5000;
    LeakOutcome revoked = store.report_leak(key.secret, LeakAction::kRevoke, {"support", ""}, Actor::operator_named("ops"));
    EXPECT_TRUE(revoked.revoked);
    EXPECT_EQ(store.find_key(key.key.key_id)->status, KA_KEY_REVOKED);
    const KeyLeak leak = store.key_leaks(acc.account.id).at(key.key.key_id);
    EXPECT_TRUE(leak.revoked);
    EXPECT_EQ(leak.source, "support");
    EXPECT_EQ(leak.at_ms, now);
    EXPECT_TRUE(key_leak_to_json(leak)["url"].is_null());
}

TEST_P(LeakStoreTest, WhatIsNotOursOrNotLiveChangesNothing) {
    CreatedAccount acc = store.create_account("Acme", 600);
    CreatedKey key = store.create_key(acc.account.id, "k", {"ip:read"}, 60);
    CreatedKey revoked = store.create_key(acc.account.id, "gone", {"ip:read"}, 60);
    store.revoke_key(std::nullopt, revoked.key.key_id);
    const size_t trail = audit(std::nullopt).size();
    const size_t events = outbox();

    const std::string foreign = generate_secret(kKeyPrefix);  // well formed, never issued here
    std::string typo = key.secret;
    typo[10] = typo[10] == 'A' ? 'B' : 'A';
    for (const std::string &s : {foreign, typo, std::string("hello world"), std::string(""),
                                 std::string("ghp_0123456789abcdefghijABCDEFGHIJ012345")}) {
        LeakOutcome out = store.report_leak(s, LeakAction::kRevoke, kGithub, scanner);
        EXPECT_EQ(out.kind, LeakedSecret::kNone);
        EXPECT_FALSE(out.recorded);
    }
    LeakOutcome again = store.report_leak(revoked.secret, LeakAction::kRevoke, kGithub, scanner);
    EXPECT_EQ(again.kind, LeakedSecret::kKey) << "ours: a true positive";
    EXPECT_FALSE(again.revoked);
    EXPECT_FALSE(again.recorded);

    EXPECT_EQ(audit(std::nullopt).size(), trail);
    EXPECT_EQ(outbox(), events);
    EXPECT_TRUE(store.key_leaks(acc.account.id).empty());
    EXPECT_EQ(store.find_key(key.key.key_id)->status, KA_KEY_ACTIVE);
}

TEST_P(LeakStoreTest, AReportOverItsBoundsIsRefusedWithNothingWritten) {
    CreatedAccount acc = store.create_account("Acme", 600);
    CreatedKey key = store.create_key(acc.account.id, "k", {"ip:read"}, 60);
    const size_t trail = audit(std::nullopt).size();
    const std::vector<std::pair<LeakReportOrigin, std::string>> bad = {
        {{"github", std::string(kMaxLeakUrlBytes + 1, 'u')}, "url"},
        {{"github", "https://x/\n"}, "url"},
        {{std::string(kMaxLeakSourceBytes + 1, 's'), ""}, "source"},
        {{"git\x7fhub", ""}, "source"},
    };
    for (const auto &[origin, field] : bad) {
        try {
            store.report_leak(key.secret, LeakAction::kRevoke, origin, scanner);
            ADD_FAILURE() << field << " accepted";
        } catch (const StoreError &e) {
            EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid);
            EXPECT_EQ(e.field(), field);
            EXPECT_EQ(std::string(e.what()).find(key.secret.substr(3)), std::string::npos);
        }
    }
    EXPECT_EQ(store.find_key(key.key.key_id)->status, KA_KEY_ACTIVE);
    EXPECT_EQ(audit(std::nullopt).size(), trail);
    // at the bound it goes through
    EXPECT_TRUE(store.report_leak(key.secret, LeakAction::kRevoke,
                                  {std::string(kMaxLeakSourceBytes, 's'), std::string(kMaxLeakUrlBytes, 'u')}, scanner)
                    .revoked);
}

TEST_P(LeakStoreTest, AnAdminTokenIsRevokedEvenUnderNotify) {
    CreatedAdminToken tok = store.create_admin_token("billing", kAllAdminScopes, std::nullopt);
    CreatedAdminToken kept = store.create_admin_token("support", kAllAdminScopes, std::nullopt);
    ASSERT_TRUE(store.admin_login(tok.secret));
    LeakOutcome out = store.report_leak(tok.secret, LeakAction::kNotify, kGithub, scanner);
    EXPECT_EQ(out.kind, LeakedSecret::kAdminToken);
    EXPECT_TRUE(out.revoked);
    EXPECT_EQ(out.target, tok.token.id);
    EXPECT_FALSE(store.admin_login(tok.secret));
    EXPECT_TRUE(store.admin_login(kept.secret));
    auto trail = audit(Id{});
    ASSERT_GE(trail.size(), 2u);
    EXPECT_EQ(trail[0].action, "admin_token.leak");
    EXPECT_EQ(trail[1].action, "admin_token.revoke");
    EXPECT_EQ(trail[0].actor.type, Actor::Type::kSecretScanning);
    // reported again: revoked already
    LeakOutcome again = store.report_leak(tok.secret, LeakAction::kRevoke, kGithub, scanner);
    EXPECT_EQ(again.kind, LeakedSecret::kAdminToken);
    EXPECT_FALSE(again.recorded);
    EXPECT_EQ(audit(Id{}).size(), trail.size());
}

TEST_P(LeakStoreTest, AConsoleTokenOrSessionStopsAtOnce) {
    CreatedAccount acc = store.create_account("Acme", 600);
    CreatedAccount other = store.create_account("Other", 600);
    ConsoleSession session = store.create_console_session(acc.account.id, 3600);
    ASSERT_TRUE(store.console_login(acc.console_token));
    ASSERT_TRUE(store.console_login(session.token));

    LeakOutcome out = store.report_leak(acc.console_token, LeakAction::kNotify, kGithub, scanner);
    EXPECT_EQ(out.kind, LeakedSecret::kConsoleToken);
    EXPECT_TRUE(out.revoked);
    EXPECT_EQ(out.account, acc.account.id);
    EXPECT_FALSE(store.console_login(acc.console_token));
    EXPECT_TRUE(store.console_login(session.token)) << "only the reported token";
    EXPECT_TRUE(store.console_login(other.console_token));

    EXPECT_TRUE(store.report_leak(session.token, LeakAction::kRevoke, kGithub, scanner).revoked);
    EXPECT_FALSE(store.console_login(session.token));
    // the session is gone from the account's sessions too: a new one is the only one
    ConsoleSession fresh = store.create_console_session(acc.account.id, 3600);
    EXPECT_TRUE(store.console_login(fresh.token));

    auto trail = audit(acc.account.id);
    size_t leaks = 0;
    for (const auto &e : trail) {
        if (e.action != "account.console_token_leak") continue;
        leaks++;
        EXPECT_EQ(e.changes["consoleToken"]["to"], "revoked");
        EXPECT_EQ(audit_to_json(e).dump().find("kac_"), std::string::npos);
    }
    EXPECT_EQ(leaks, 2u);
    EXPECT_FALSE(store.report_leak(session.token, LeakAction::kRevoke, kGithub, scanner).recorded);
}

INSTANTIATE_TEST_SUITE_P(Backends, LeakStoreTest, keyauth::testing::kBothBackends, keyauth::testing::backend_name);
