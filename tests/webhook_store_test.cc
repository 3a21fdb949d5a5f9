// The webhook tables on both backends (issue 46): an acknowledged change has
// its event in the outbox (written in the same transaction) and a refused
// one has none; the fan-out gives each endpoint that wants an event (and
// existed when it happened) one pending delivery; an attempt is settled once
// (a stale settle writes nothing); 410 disables the endpoint; a threshold's
// event is emitted once; bad endpoints are refused with nothing written.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <cstring>

#include "console_fixture.h"
#include "webhook_events.h"
#include "webhook_schedule.h"
#include "webhook_signing.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::TempDir;

namespace {

class WebhookStoreTest : public ::testing::TestWithParam<Backend> {
protected:
    TempDir dir;
    int64_t now = 1796083200000;  // 2026-12-01T00:00:00Z
    std::unique_ptr<Store> store_ptr = make_store();
    Store &store = *store_ptr;

    std::unique_ptr<Store> make_store() {
        auto s = std::make_unique<Store>(keyauth::testing::backend_for(GetParam(), dir));
        s->set_clock([this] { return now; });
        return s;
    }
    Webhook hook(std::vector<std::string> events, std::optional<Id> account = std::nullopt) {
        return store.create_webhook(WebhookSpec{"https://hooks.example.com/in", std::move(events), account});
    }
    size_t drain() {
        size_t n = 0;
        while (size_t k = store.fan_out_webhook_events(64)) n += k;
        return n;
    }
    size_t audit_events() { return store.list_audit(std::nullopt, 1000, std::nullopt).events.size(); }
};

}  // namespace

TEST_P(WebhookStoreTest, AChangeAndItsEventAreWrittenTogether) {
    EXPECT_EQ(store.webhook_queue_gauges().outbox, 0u);
    CreatedAccount acc = store.create_account("Acme", 600);
    store.create_key(acc.account.id, "k", {"ip:read"}, 60);
    EXPECT_EQ(store.webhook_queue_gauges().outbox, 2u) << "account.created and key.created";
    // a refused change: no event
    EXPECT_THROW(store.set_plan(acc.account.id, std::string("no-such-plan")), StoreError);
    store.rotate_console_token(acc.account.id, 0);  // audited, but raises no event type
    EXPECT_EQ(store.webhook_queue_gauges().outbox, 2u);
    // with no endpoint, the fan-out drains them to nothing
    EXPECT_EQ(drain(), 2u);
    EXPECT_EQ(store.webhook_queue_gauges().outbox, 0u);
    EXPECT_EQ(store.webhook_queue_gauges().pending, 0u);
}

TEST_P(WebhookStoreTest, EachEndpointThatWantsAnEventGetsOneDelivery) {
    CreatedAccount a = store.create_account("A", 600);
    CreatedAccount b = store.create_account("B", 600);
    drain();  // before any endpoint: nobody hears of these
    now += 1000;
    Webhook keys = hook({"key.created", "key.revoked"});
    Webhook only_b = hook({"key.created"}, b.account.id);
    Webhook accounts = hook({"account.suspended"});
    now += 1000;
    // a millisecond apart: event ids order writes of different accounts
    // only across milliseconds
    CreatedKey ka = store.create_key(a.account.id, "ka", {"ip:read"}, 60);
    now += 1;
    store.create_key(b.account.id, "kb", {"ip:read"}, 60);
    now += 1;
    store.revoke_key(std::nullopt, ka.key.key_id);
    now += 1;
    store.set_suspended(a.account.id, true);
    EXPECT_EQ(drain(), 4u);
    auto of = [&](const Webhook &w) { return store.list_deliveries(w.id, std::nullopt, 100, std::nullopt).deliveries; };
    ASSERT_EQ(of(keys).size(), 3u);
    EXPECT_EQ(of(keys)[0].type, "key.created");
    EXPECT_EQ(of(keys)[2].type, "key.revoked");
    ASSERT_EQ(of(only_b).size(), 1u);
    ASSERT_EQ(of(accounts).size(), 1u);
    EXPECT_EQ(of(accounts)[0].type, "account.suspended");
    EXPECT_EQ(store.due_deliveries(now, 100).size(), 5u);
    EXPECT_EQ(store.webhook_queue_gauges().pending, 5u);
    // the body: type, timestamp, data with ids and changes, no secret
    const nlohmann::json body = nlohmann::json::parse(of(keys)[0].body);
    EXPECT_EQ(body["type"], "key.created");
    EXPECT_EQ(body["data"]["keyId"], id_to_string(kKeyIdPrefix, ka.key.key_id));
    EXPECT_EQ(body["data"]["accountId"], id_to_string(kAccountIdPrefix, a.account.id));
    EXPECT_EQ(of(keys)[0].body.find(ka.secret), std::string::npos);
    EXPECT_EQ(of(keys)[0].body.find(ka.secret.substr(0, 12)), std::string::npos);
}

TEST_P(WebhookStoreTest, AnAttemptIsSettledOnceAndRetriedOnSchedule) {
    Webhook w = hook({"account.created"});
    now += 1;
    store.create_account("A", 600);
    drain();
    auto due = store.due_deliveries(now, 10);
    ASSERT_EQ(due.size(), 1u);
    const Delivery first = due[0];
    DeliveryUpdate failed = settle_webhook_attempt(first, 500, "", now, 0);
    EXPECT_EQ(failed.next.status, DeliveryStatus::kPending);
    EXPECT_EQ(failed.next.next_ms, now + 4500) << "5 s, the low end of its jitter";
    ASSERT_TRUE(store.update_delivery(first, failed));
    EXPECT_FALSE(store.update_delivery(first, settle_webhook_attempt(first, 200, "", now, 0)))
        << "a second settle of the same attempt (another sender's) writes nothing";
    EXPECT_TRUE(store.due_deliveries(now, 10).empty()) << "not due before its retry";
    now += 5000;
    due = store.due_deliveries(now, 10);
    ASSERT_EQ(due.size(), 1u);
    EXPECT_EQ(due[0].attempts, 1);
    ASSERT_TRUE(store.update_delivery(due[0], settle_webhook_attempt(due[0], 204, "", now, 0)));
    EXPECT_TRUE(store.due_deliveries(now + 86400000LL, 10).empty());
    auto delivered = store.list_deliveries(w.id, DeliveryStatus::kDelivered, 10, std::nullopt).deliveries;
    ASSERT_EQ(delivered.size(), 1u);
    EXPECT_EQ(delivered[0].attempts, 2);
    EXPECT_EQ(delivered[0].last_status, 204);
    EXPECT_TRUE(store.list_deliveries(w.id, DeliveryStatus::kPending, 10, std::nullopt).deliveries.empty());
}

TEST_P(WebhookStoreTest, GoneDisablesTheEndpoint) {
    Webhook w = hook({"account.created"});
    now += 1;
    store.create_account("A", 600);
    drain();
    const Delivery d = store.due_deliveries(now, 10).at(0);
    ASSERT_TRUE(store.update_delivery(d, settle_webhook_attempt(d, 410, "", now, 0)));
    EXPECT_TRUE(store.find_webhook(w.id)->disabled_ms.has_value());
    EXPECT_EQ(store.list_deliveries(w.id, DeliveryStatus::kDead, 10, std::nullopt).deliveries.size(), 1u);
    const AuditEvent newest = store.list_audit(Id{}, 1, std::nullopt).events.at(0);
    EXPECT_EQ(newest.action, "webhook.disable");
    // a disabled endpoint is sent nothing more
    now += 1;
    store.create_account("B", 600);
    drain();
    EXPECT_EQ(store.list_deliveries(w.id, std::nullopt, 10, std::nullopt).deliveries.size(), 1u);
}

TEST_P(WebhookStoreTest, BadEndpointsAreRefusedWithNothingWritten) {
    const size_t before = audit_events();
    auto refused = [&](WebhookSpec spec, const char *field) {
        try {
            store.create_webhook(spec);
            ADD_FAILURE() << "accepted " << spec.url;
        } catch (const StoreError &e) {
            EXPECT_EQ(e.field(), field) << e.what();
        }
    };
    refused({"http://hooks.example.com/in", {"key.created"}, std::nullopt}, "url");
    refused({"not a url", {"key.created"}, std::nullopt}, "url");
    refused({"https://hooks.example.com/" + std::string(2100, 'a'), {"key.created"}, std::nullopt}, "url");
    refused({"https://hooks.example.com/in", {}, std::nullopt}, "events");
    refused({"https://hooks.example.com/in", {"key.exploded"}, std::nullopt}, "events");
    Id nobody = generate_id(now);
    try {
        store.create_webhook({"https://hooks.example.com/in", {"key.created"}, nobody});
        ADD_FAILURE() << "accepted an endpoint for no account";
    } catch (const StoreError &e) {
        // the code the admin API answers with, as for every other route
        EXPECT_EQ(e.kind(), StoreError::Kind::kNotFound);
        EXPECT_EQ(e.code(), "ACCOUNT_NOT_FOUND") << e.what();
    }
    EXPECT_TRUE(store.list_webhooks().empty());
    EXPECT_EQ(audit_events(), before);
}

TEST_P(WebhookStoreTest, DeletingAnEndpointDropsItsDeliveries) {
    Webhook w = hook({"account.created"});
    now += 1;
    store.create_account("A", 600);
    drain();
    store.delete_webhook(w.id);
    EXPECT_THROW(store.list_deliveries(w.id, std::nullopt, 10, std::nullopt), StoreError);
    const Delivery d = store.due_deliveries(now, 10).at(0);
    store.drop_delivery(d);
    EXPECT_TRUE(store.due_deliveries(now, 10).empty());
    EXPECT_EQ(store.webhook_queue_gauges().pending, 0u);
    EXPECT_EQ(store.list_audit(Id{}, 1, std::nullopt).events.at(0).action, "webhook.delete");
}

TEST_P(WebhookStoreTest, AMarkedEventIsEmittedOnce) {
    OutboxEvent e;
    e.at_ms = now;
    e.id = generate_id(now);
    e.type = kQuotaThreshold;
    EXPECT_TRUE(store.emit_event_once("quota/acc_x/1/80", e));
    e.id = generate_id(now);
    EXPECT_FALSE(store.emit_event_once("quota/acc_x/1/80", e));
    EXPECT_EQ(store.webhook_queue_gauges().outbox, 1u);
}

// One event to every endpoint there may be (50) is one write, also on etcd
// (128 operations a txn); the 51st endpoint is refused.
TEST_P(WebhookStoreTest, OneEventToEveryEndpointFitsOneWrite) {
    for (size_t i = 0; i < Store::kMaxWebhooks; i++) hook({"account.created"});
    try {
        hook({"account.created"});
        ADD_FAILURE() << "a 51st endpoint";
    } catch (const StoreError &e) {
        EXPECT_EQ(e.code(), "WEBHOOK_LIMIT_REACHED");
    }
    now += 1;
    store.create_account("A", 600);
    EXPECT_EQ(drain(), 1u);
    EXPECT_EQ(store.due_deliveries(now, 1000).size(), Store::kMaxWebhooks);
}

// Delivered and dead deliveries go after 30 days (the sender's prune);
// pending ones stay, and an endpoint's deliveries go with it.
TEST_P(WebhookStoreTest, SettledDeliveriesArePrunedPendingOnesKept) {
    Webhook kept = hook({"account.created"});
    Webhook gone = hook({"account.created"});
    now += 1;
    store.create_account("A", 600);
    now += 1;
    store.create_account("B", 600);
    drain();
    auto due = store.due_deliveries(now, 10);
    ASSERT_EQ(due.size(), 4u);
    for (const Delivery &d : due) {
        if (d.webhook == kept.id && d.event == due[0].event) {
            ASSERT_TRUE(store.update_delivery(d, settle_webhook_attempt(d, 200, "", now, 0)));
        }
    }
    store.delete_webhook(gone.id);
    EXPECT_EQ(store.prune_deliveries(now, 100), 2u) << "the deleted endpoint's two; the delivered one is too new";
    EXPECT_EQ(store.prune_deliveries(now + 1, 100), 1u) << "the delivered one, once old enough";
    const auto left = store.list_deliveries(kept.id, std::nullopt, 10, std::nullopt).deliveries;
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].status, DeliveryStatus::kPending);
    EXPECT_EQ(store.webhook_queue_gauges().pending, 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhookStoreTest, keyauth::testing::kBothBackends,
                         keyauth::testing::backend_name);

// About 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, each within ±10 %; the
// eighth failure is the last.
TEST(WebhookSchedule, RetriesOnScheduleThenDies) {
    const int64_t base[] = {5000, 300000, 1800000, 7200000, 18000000, 36000000, 36000000};
    for (int attempt = 1; attempt <= 7; attempt++) {
        for (uint32_t r : {0u, 1u, 0x7fffffffu, 0xffffffffu}) {
            auto wait = webhook_retry_delay_ms(attempt, r);
            ASSERT_TRUE(wait) << attempt;
            EXPECT_GE(*wait, base[attempt - 1] * 9 / 10);
            EXPECT_LT(*wait, base[attempt - 1] * 11 / 10);
        }
    }
    EXPECT_FALSE(webhook_retry_delay_ms(8, 0));
    Delivery d;
    d.attempts = 7;
    DeliveryUpdate u = settle_webhook_attempt(d, 0, "timeout", 1000, 0);
    EXPECT_EQ(u.next.status, DeliveryStatus::kDead);
    EXPECT_EQ(u.next.attempts, 8);
    EXPECT_EQ(u.next.last_error, "timeout");
    d.attempts = 0;
    EXPECT_EQ(settle_webhook_attempt(d, 302, "", 1000, 0).next.status, DeliveryStatus::kPending)
        << "a redirect is not followed: a failure";
}

// The secret is whsec_ + base64 of 32 bytes; the signature is the
// specification's, computed here from its text with OpenSSL's HMAC over
// id.timestamp.body, with the key the secret's base64 decodes to.
TEST(WebhookSigning, SignsAsTheSpecificationSays) {
    TempDir dir;
    std::string error;
    auto key = load_or_make_webhook_key(dir.sub("webhook.key"), error);
    ASSERT_TRUE(key) << error;
    auto again = load_webhook_key(dir.sub("webhook.key"), error);
    ASSERT_TRUE(again);
    EXPECT_EQ(*key, *again) << "made once, then read";
    const Id id = generate_id(1);
    const WebhookSecret secret = webhook_secret(*key, id);
    const std::string text = webhook_secret_text(secret);
    ASSERT_EQ(text.rfind("whsec_", 0), 0u);
    // decode the base64 with OpenSSL, independently of the sender's encoder
    unsigned char decoded[48];
    const int n = EVP_DecodeBlock(decoded, reinterpret_cast<const unsigned char *>(text.data() + 6),
                                  static_cast<int>(text.size() - 6));
    ASSERT_EQ(n, 33) << "32 bytes and the padding's zero";
    EXPECT_EQ(0, std::memcmp(decoded, secret.data(), 32));
    const std::string body = R"({"type":"key.created"})";
    const std::string signed_text = "evt_1.1614265330." + body;
    unsigned char mac[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), decoded, 32, reinterpret_cast<const unsigned char *>(signed_text.data()), signed_text.size(),
         mac, &len);
    unsigned char b64[64] = {};
    EVP_EncodeBlock(b64, mac, 32);
    EXPECT_EQ(webhook_signature(secret, "evt_1", 1614265330, body), "v1," + std::string(reinterpret_cast<char *>(b64)));
    EXPECT_NE(webhook_signature(secret, "evt_1", 1614265331, body), webhook_signature(secret, "evt_1", 1614265330, body));
    // another endpoint, another secret
    EXPECT_NE(webhook_secret(*key, generate_id(2)), secret);
}

TEST(WebhookSigning, AKeyFileOthersMayReadIsRefused) {
    TempDir dir;
    std::string error;
    ASSERT_TRUE(load_or_make_webhook_key(dir.sub("k"), error));
    ASSERT_EQ(chmod(dir.sub("k").c_str(), 0644), 0);
    EXPECT_FALSE(load_webhook_key(dir.sub("k"), error));
    EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
    EXPECT_FALSE(load_webhook_key(dir.sub("missing"), error));
}
