// The writer side of the LMDB schema, shared by keyauthctl and keyauthd:
// accounts, console tokens, API keys, plans and the exchange rate. The
// business rules (validation, ids, hashing, caps) live here once; each write
// is computed as a Mutation (mutation.h) from what it read, and a backend
// (store_backend.h) applies it all or nothing, durably (committed with fsync
// before the method returns), so an acknowledged write survives a crash.
// Secrets are hashed before they touch the store and are returned to the
// caller exactly once.
#pragma once

// The LMDB backend grows a full map itself; its errors reach callers as they
// are: MapFullError (lmdb_map.h, via lmdb_backend.h) for a map that cannot
// grow, lmdb::error (ENOSPC, EIO) for the rest.
#include <lmdb++.h>

#include <cstdint>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_tokens.h"
#include "audit.h"
#include "ids.h"
#include "key_rules.h"
#include "leak_records.h"
#include "lmdb_backend.h"
#include "records.h"
#include "store_backend.h"
#include "store_error.h"
#include "validation.h"
#include "webhook_records.h"

namespace keyauth {

struct Account {
    Id id{};
    AccountRecord record;
};

struct CreatedAccount {
    Account account;
    std::string console_token;  // shown once
};

struct CreatedKey {
    KeyRecord key;
    std::string secret;  // shown once
};

struct KeyPage {
    std::vector<KeyRecord> keys;
    std::optional<Id> next;  // the last key id of this page, if more follow
};

// What a new key is.
struct KeySpec {
    std::string name;
    std::vector<std::string> scopes;
    uint32_t requested_rpm = 0;
    Expiry expires_at;  // nullopt: never; the epoch is an instant like any other
    Quota quota;        // the key's own (day, month or total); none: the account's alone
    std::string allowed_ips{};  // packed (restrictions.h); empty: any address
    std::string meta{};         // a JSON object handed on; empty: none
};

// The fields an update changes; the others stay.
struct KeyChanges {
    std::optional<std::string> name;
    std::optional<std::vector<std::string>> scopes;
    std::optional<uint32_t> requested_rpm;
    std::optional<Expiry> expires_at;  // given: a new expiry (nullopt inside: never)
    std::optional<Quota> quota;        // given: the key's quota (none: removed)
    std::optional<std::string> allowed_ips;  // given: packed; empty: any address
    std::optional<std::string> meta;         // given: compact JSON; empty: none
    bool empty() const { return !name && !scopes && !requested_rpm && !expires_at && !quota && !allowed_ips && !meta; }
};

// Account fields an operator sets; at creation, the unset ones take their
// defaults (100 keys, any scope, no quota) or, on a plan, the plan's. A
// value given (entitlement, maxKeys, quota) is the account's own and wins
// over its plan's (its override bit is set); one in follow_plan goes back
// to following the plan, and its own quota and cap return to the defaults
// (issue 28); an account on no plan (or on one the catalog lacks) has none
// to follow: kConflict ACCOUNT_HAS_NO_PLAN (issue 44).
struct AccountChanges {
    std::optional<std::string> name;
    std::optional<uint32_t> entitlement_rpm;
    std::optional<uint32_t> max_keys;
    std::optional<std::vector<std::string>> allowed_scopes;  // empty: any scope
    std::optional<Quota> quota;                              // none: unlimited
    uint8_t follow_plan = 0;                                 // KA_OVERRIDE_* bits
    std::optional<std::string> plan_id;                      // create_account only
    // the business's own id of the account: unique (kConflict
    // EXTERNAL_ID_TAKEN); given as none, removed
    std::optional<std::optional<std::string>> external_id;
    std::optional<std::string> allowed_ips;  // given: packed (restrictions.h); empty: any address
    std::optional<std::string> meta;         // given: compact JSON (restrictions.h); empty: none
    bool empty() const {
        return !name && !entitlement_rpm && !max_keys && !allowed_scopes && !quota && !follow_plan &&
               !external_id && !allowed_ips && !meta;
    }
};

// An account and its plan read at one moment, with its effective values
// (records.h: effective_entitlements). plan is none when the account has
// none, or the catalog no longer holds it (then its own values apply).
struct AccountOnPlan {
    Account account;
    std::optional<PlanRecord> plan;
    Entitlements effective;
};

struct AccountPage {
    std::vector<Account> accounts;
    std::optional<Id> next;  // the last account id of this page, if more follow
};

// A console token of an account that stops at expires_ms: how the
// business's own login hands its customer to the console page.
struct ConsoleSession {
    std::string token;  // "kac_...", shown once
    int64_t expires_ms = 0;
};

struct CreatedAdminToken {
    AdminToken token;
    std::string secret;  // "kaa_...", shown once
};

struct RolledKey {
    KeyRecord predecessor;  // as the roll left it
    CreatedKey successor;   // with its secret, shown once
};

// Where a catalog import moves the accounts of a plan it drops: the plan
// retired -> the plan of the imported catalog its accounts move to.
using PlanRetirements = std::map<std::string, std::string>;

// What an import did.
struct CatalogImport {
    size_t plans = 0;                     // in the catalog now
    size_t removed = 0;                   // plans it dropped
    std::map<std::string, size_t> moved;  // plan retired -> accounts moved off it
};

// What a new webhook endpoint is (store_webhooks.cc).
struct WebhookSpec {
    std::string url;                  // https only (webhook_url.h)
    std::vector<std::string> events;  // webhook_events.h's types
    std::optional<Id> account;        // only this account's events
};

struct DeliveryPage {
    std::vector<Delivery> deliveries;  // oldest event first
    std::optional<Id> next;            // the last event id of this page, if more follow
};

// A delivery as an attempt left it (webhook_sender.h computes it).
struct DeliveryUpdate {
    Delivery next;                 // the record to write in place of the one read
    bool disable_webhook = false;  // the receiver answered 410 Gone
};

// What /metrics shows of the webhook queue.
struct WebhookQueueGauges {
    uint64_t pending = 0;
    std::optional<int64_t> oldest_pending_ms;  // when the oldest pending event happened
    uint64_t outbox = 0;                       // events not yet fanned out
};

// A secret reported as leaked (store_leaks.cc; DESIGN, *Leaked keys revoke
// themselves*). A key gets the deployment's --leak-action; an admin or
// console token is always revoked: it is the business's own, and worse
// in a stranger's hands than a key.
enum class LeakAction { kRevoke, kNotify };
enum class LeakedSecret { kNone, kKey, kAdminToken, kConsoleToken };

struct LeakReportOrigin {
    std::string source;  // who found it: "github", an admin token's name, ...
    std::string url;     // where it was found; may be empty
};

struct LeakOutcome {
    LeakedSecret kind = LeakedSecret::kNone;  // none: not a secret this store issued
    bool revoked = false;   // this report revoked it
    bool recorded = false;  // this report wrote anything (false: revoked before, or told before)
    Id account{};           // a key's or a console token's account; zero for an admin token
    Id target{};            // the key's or the admin token's id
};

// Who a console token belongs to.
struct ConsoleLogin {
    Id account{};
    bool suspended = false;
};

class Store {
public:
    static constexpr size_t kDefaultMapSize = LmdbBackend::kDefaultMapSize;
    static constexpr size_t kMaxPageSize = 1000;
    // A write whose guards failed is computed again from fresh reads this
    // many times in all, then given up with StoreError kBusy.
    static constexpr int kWriteAttempts = 8;
    // Expiry is at most ten years ahead; a roll's grace at most a week.
    static constexpr int64_t kMaxExpiryAheadMs = keyauth::kMaxExpiryAheadMs;
    static constexpr int64_t kMaxGraceSeconds = 604800;
    static constexpr int64_t kMinSessionSeconds = 60;
    static constexpr int64_t kMaxSessionSeconds = 86400;
    static constexpr size_t kMaxSessions = 100;

    // The single-host store: an LMDB environment at path (LmdbBackend says
    // how map_size and permissions are handled).
    explicit Store(const std::string &path, size_t map_size = 0);
    explicit Store(std::unique_ptr<StoreBackend> backend);

    // Injected wall clock (ms since the epoch), for tests.
    void set_clock(std::function<int64_t()> clock) { clock_ = std::move(clock); }

    // A write that waited longer than this for the writer lock (held by a
    // bulk keyauthctl run, say) is given up with StoreError kBusy, before
    // anything is written: its client (behind a proxy timeout) may have gone
    // and would retry. Zero, the default, waits as long as it takes.
    void set_write_wait_limit(std::chrono::milliseconds limit) {
        backend_->set_write_wait_limit(limit);
    }

    // Told how long each applied write took (the commit included: LMDB's
    // fsync, or etcd's txn), for keyauthd's /metrics. Set before serving.
    void set_write_observer(std::function<void(double seconds)> observe) {
        write_observer_ = std::move(observe);
    }
    StoreGauges gauges() { return backend_->gauges(); }

    // Every write below records an audit event in the same transaction,
    // naming `actor`; a write that changes nothing records none.

    // On a plan (controls.plan_id: kNotFound PLAN_NOT_FOUND if the catalog
    // has none such), entitlement_rpm 0 follows the plan's rate.
    CreatedAccount create_account(std::string_view name, uint32_t entitlement_rpm,
                                  const AccountChanges &controls = {}, const Actor &actor = {});
    std::optional<Account> find_account(const Id &id);
    std::optional<AccountOnPlan> find_account_on_plan(const Id &id);
    // Puts the account on a plan (kNotFound PLAN_NOT_FOUND if the catalog
    // has no such plan), or on none; audit action account.set_plan. Values
    // the account overrides stay its own; a lower cap leaves keys alone.
    // order_id (the payment service's, optional) is recorded in the event.
    Account set_plan(const Id &id, const std::optional<std::string> &plan_id, const Actor &actor = {},
                     const std::string &order_id = "");
    std::vector<Account> list_accounts();
    // Accounts in id (creation) order, starting after `after`.
    AccountPage list_accounts_page(size_t limit, const std::optional<Id> &after);
    // The account of the business's id, or none; and an account's id there.
    std::optional<Id> find_account_by_external_id(std::string_view external_id);
    std::optional<std::string> external_id_of(const Id &account);
    // A console token of an active account that stops after ttl_seconds
    // (kMinSessionSeconds..kMaxSessionSeconds; kInvalid "ttlSeconds"):
    // kNotFound ACCOUNT_NOT_FOUND, kForbidden ACCOUNT_SUSPENDED. The
    // account's expired sessions go, and past kMaxSessions live ones the
    // oldest; audit action account.create_session.
    ConsoleSession create_console_session(const Id &account, int64_t ttl_seconds, const Actor &actor = {});
    // Name, entitlement, key cap and allowed scopes (kInvalid if `changes`
    // is empty). A lower cap leaves existing keys alone.
    Account update_account(const Id &id, const AccountChanges &changes, const Actor &actor = {});
    Account set_entitlement(const Id &id, uint32_t entitlement_rpm, const Actor &actor = {});
    // A suspended account's console calls and keys are refused (403
    // ACCOUNT_SUSPENDED) until it is resumed; idempotent. A resume admits
    // the account's active keys as if new (key_rules.h: admit_resume).
    Account set_suspended(const Id &id, bool suspended, const Actor &actor = {});
    // A new console token (returned once); the old one stops now, or after
    // grace_seconds (0..kMaxGraceSeconds). With no grace every older token
    // stops now, also one still in an earlier rotation's grace.
    CreatedAccount rotate_console_token(const Id &id, int64_t grace_seconds, const Actor &actor = {});
    // The account of a live console token, suspended or not.
    std::optional<ConsoleLogin> console_login(std::string_view token);
    // The account of a live console token of an active account.
    std::optional<Id> account_for_console_token(std::string_view token);

    // A key, refused with kForbidden SCOPE_NOT_ALLOWED / ACCOUNT_SUSPENDED
    // or kConflict KEY_LIMIT_REACHED by the account's controls.
    CreatedKey create_key(const Id &account, const KeySpec &spec, const Actor &actor = {});
    CreatedKey create_key(const Id &account, std::string_view name,
                          const std::vector<std::string> &scopes, uint32_t requested_rpm);
    // `count` keys alike in one transaction (provisioning, load tests), at
    // most max_keys_per_write() (etcd: 40; a caller creating more pages).
    // One audit event names the first and the count. `made` (optional) is
    // told how many keys are made so far, every 65,536 and at the end,
    // before they are written.
    std::vector<CreatedKey> create_keys(const Id &account, const KeySpec &spec, size_t count,
                                        const Actor &actor = {},
                                        const std::function<void(size_t made)> &made = {});
    std::vector<CreatedKey> create_keys(const Id &account, std::string_view name,
                                        const std::vector<std::string> &scopes,
                                        uint32_t requested_rpm, size_t count);
    size_t max_keys_per_write() const;
    // Keys of one account in creation order, starting after `after`.
    KeyPage list_keys(const Id &account, size_t limit, const std::optional<Id> &after);
    // With `owner`, a key of another account is kNotFound, here and below.
    // Revoking a revoked key returns it unchanged.
    KeyRecord revoke_key(const std::optional<Id> &owner, const Id &key_id, const Actor &actor = {});
    // Same id and secret; kConflict KEY_REVOKED for a revoked key,
    // KEY_ALREADY_ROLLED for a change of a rolled predecessor's expiry; a key
    // the change makes active again is admitted as a new one (key_rules.h).
    KeyRecord update_key(const std::optional<Id> &owner, const Id &key_id, const KeyChanges &changes,
                         const Actor &actor = {});
    // A successor with a new secret, the same name, scopes, rate and expiry,
    // and the predecessor's rate-limit state; the predecessor stops now
    // (grace 0: revoked) or at now + grace. kConflict KEY_REVOKED,
    // KEY_ALREADY_ROLLED or KEY_EXPIRED (in that order); the successor is
    // admitted as a new key (suspension, allowed scopes, the cap).
    RolledKey roll_key(const std::optional<Id> &owner, const Id &key_id, int64_t grace_seconds,
                       const Actor &actor = {});
    std::optional<KeyRecord> find_key(const Id &key_id);

    // Audit events newest first: one account's (what its console did and
    // what operators did to it), or with no account every event.
    AuditPage list_audit(const std::optional<Id> &account, size_t limit,
                         const std::optional<Id> &after);

    int64_t now() const { return clock_(); }

    // The plan catalog. import_plans validates the whole catalog and replaces
    // the old one in one transaction: readers see the old or the new, never
    // a mix. list_plans is ordered by sortOrder.
    CatalogImport import_plans(const std::vector<PlanRecord> &plans, const Actor &actor = {},
                               const PlanRetirements &retire = {});
    std::vector<PlanRecord> list_plans();
    // For the payment service, in process: does this planId exist, and what
    // does it cost (price_paise is the amount to charge)?
    std::optional<PlanRecord> find_plan(std::string_view id);

    // INR per USD, in millionths.
    FxRecord set_exchange_rate(uint64_t inr_per_usd_micro, const Actor &actor = {});
    std::optional<FxRecord> exchange_rate();

    // The deployment's key prefix NAME (key_format.h; store_config.cc): new
    // keys are NAME_..., keys of an earlier NAME keep working (the edge takes
    // any NAME). kInvalid "keyPrefix" for a NAME outside the grammar; audit
    // action config.set_key_prefix in the operator's trail; the current NAME
    // again changes nothing. Both return every NAME the store has had,
    // newest (the current) first: {"ka"} until one is set.
    std::vector<std::string> set_key_prefix(std::string_view name, const Actor &actor = {});
    std::vector<std::string> key_prefixes();

    // Admin tokens (admin_tokens.h), in the operator's own audit trail:
    // kInvalid naming "name", "scopes" (none) or "expiresAt" (not in the
    // future, or past ten years).
    CreatedAdminToken create_admin_token(std::string_view name, uint32_t scopes, Expiry expires_at,
                                         const Actor &actor = {});
    std::vector<AdminToken> list_admin_tokens();
    // Stops the token at the next call; revoking a revoked token returns it
    // unchanged. kNotFound ADMIN_TOKEN_NOT_FOUND.
    AdminToken revoke_admin_token(const Id &id, const Actor &actor = {});
    // The live token this secret is (well formed, known, not revoked, not
    // expired), or none.
    std::optional<AdminToken> admin_login(std::string_view secret);

    // Webhook endpoints (DESIGN, *Events and webhooks*), in the operator's
    // audit trail. create: kInvalid naming "url" (webhook_url.h), "events"
    // (none, or a type that is none) or "accountId"; kNotFound
    // ACCOUNT_NOT_FOUND; kConflict WEBHOOK_LIMIT_REACHED past kMaxWebhooks.
    // The signing secret is not the store's: webhook_signing.h derives it.
    // At most 50 endpoints: one event's fan-out to all of them (two records
    // each) fits one etcd txn of 128 operations.
    static constexpr size_t kMaxWebhooks = 50;
    Webhook create_webhook(const WebhookSpec &spec, const Actor &actor = {});
    std::vector<Webhook> list_webhooks();
    std::optional<Webhook> find_webhook(const Id &id);
    // kNotFound WEBHOOK_NOT_FOUND. Its pending deliveries are dropped by the
    // sender as it meets them.
    Webhook delete_webhook(const Id &id, const Actor &actor = {});
    // One endpoint's deliveries in event order, after `after` (an event id),
    // of one status or all. kNotFound WEBHOOK_NOT_FOUND.
    DeliveryPage list_deliveries(const Id &webhook, std::optional<DeliveryStatus> status, size_t limit,
                                 const std::optional<Id> &after);

    // The sender's side (webhook_sender.h). Moves up to `limit` events from
    // the outbox to a pending delivery for each endpoint that wants them
    // (and existed when the event happened), in one write each batch;
    // returns how many events it took.
    size_t fan_out_webhook_events(size_t limit);
    // Pending deliveries due at now_ms, earliest first, at most `limit`.
    std::vector<Delivery> due_deliveries(int64_t now_ms, size_t limit);
    // Writes update.next over `as_read` (moving its due entry); false, and
    // nothing written, when the record is no longer `as_read` (another sender
    // got there) or is gone. With disable_webhook the endpoint is disabled
    // too (audit action webhook.disable).
    bool update_delivery(const Delivery &as_read, const DeliveryUpdate &update);
    // Drops a due delivery whose endpoint is gone.
    void drop_delivery(const Delivery &as_read);
    // Writes `event` to the outbox together with `mark`, unless the mark is
    // there already: a threshold or expiry event is emitted once. True when
    // written.
    bool emit_event_once(std::string_view mark, const OutboxEvent &event);
    WebhookQueueGauges webhook_queue_gauges();
    // Forgets delivered and dead deliveries settled before `before_ms`, at
    // most `limit` of them (and every delivery of an endpoint that is
    // gone); returns how many.
    size_t prune_deliveries(int64_t before_ms, size_t limit);

    // A reported secret: a key of this store (of any prefix it has made
    // keys under), an admin token or a console token, by its hash; anything
    // else is LeakedSecret::kNone and nothing is read. What the report does
    // is audited (key.leak, key.revoke, admin_token.leak, ...; actor as
    // given), and a key's report is kept for the console (key_leaks). A
    // revoked secret, or a key reported again under kNotify, changes
    // nothing. kInvalid naming "url" or "source" past leak_records.h's bounds.
    LeakOutcome report_leak(std::string_view secret, LeakAction action, const LeakReportOrigin &origin,
                            const Actor &actor = {});
    // The reports of an account's keys, by key id.
    std::map<Id, KeyLeak> key_leaks(const Id &account);

private:
    // Computes a write with `plan(reads, mutation)` and applies it; see store_internal.h.
    template <class Plan>
    auto write(Plan &&plan);

    std::unique_ptr<StoreBackend> backend_;
    std::function<int64_t()> clock_;
    std::function<void(double)> write_observer_;
};

int64_t wall_clock_ms();

}  // namespace keyauth
