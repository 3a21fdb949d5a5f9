// The writer side of the LMDB schema, shared by keyauthctl and keyauthd:
// accounts, console tokens and API keys. Every method is one LMDB write
// transaction, committed with fsync before it returns (LMDB's default), so an
// acknowledged write survives a crash. Secrets are hashed before they touch
// the store and are returned to the caller exactly once.
#pragma once

#include <lmdb++.h>

#include <cstdint>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "records.h"
#include "store_error.h"

namespace keyauth {

inline constexpr uint32_t kMaxRatePerMinute = 10'000'000;

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

class Store {
public:
    static constexpr size_t kDefaultMapSize = size_t{1} << 32;  // sparse file
    static constexpr size_t kMaxPageSize = 1000;

    // Opens (creating if needed) the environment directory at path, with a
    // map of at least map_size bytes, and never less than the store was last
    // written with; 0: as written, kDefaultMapSize for a new store. Refuses
    // (StorePermissionError, permissions.h) a store other users can write.
    explicit Store(const std::string &path, size_t map_size = 0);

    // Injected wall clock (ms since the epoch), for tests.
    void set_clock(std::function<int64_t()> clock) { clock_ = std::move(clock); }

    // A write that waited longer than this for the writer lock (held by a
    // bulk keyauthctl run, say) is given up with StoreError kBusy, before
    // anything is written: its client (behind a proxy timeout) may have gone
    // and would retry. Zero, the default, waits as long as it takes.
    void set_write_wait_limit(std::chrono::milliseconds limit) { write_wait_limit_ = limit; }

    CreatedAccount create_account(std::string_view name, uint32_t entitlement_rpm);
    std::optional<Account> find_account(const Id &id);
    std::vector<Account> list_accounts();
    Account set_entitlement(const Id &id, uint32_t entitlement_rpm);
    std::optional<Id> account_for_console_token(std::string_view token);

    CreatedKey create_key(const Id &account, std::string_view name,
                          const std::vector<std::string> &scopes, uint32_t requested_rpm);
    // `count` keys alike in one transaction (provisioning, load tests).
    std::vector<CreatedKey> create_keys(const Id &account, std::string_view name,
                                        const std::vector<std::string> &scopes,
                                        uint32_t requested_rpm, size_t count);
    // Keys of one account in creation order, starting after `after`.
    KeyPage list_keys(const Id &account, size_t limit, const std::optional<Id> &after);
    // Revokes a key; with `owner`, a key of another account is "not found".
    // Revoking a revoked key returns it unchanged.
    KeyRecord revoke_key(const std::optional<Id> &owner, const Id &key_id);
    std::optional<KeyRecord> find_key(const Id &key_id);

    // The plan catalog. import_plans validates the whole catalog and replaces
    // the old one in one transaction: readers see the old or the new, never
    // a mix. list_plans is ordered by sortOrder.
    void import_plans(const std::vector<PlanRecord> &plans);
    std::vector<PlanRecord> list_plans();
    // For the payment service, in process: does this planId exist, and what
    // does it cost (price_paise is the amount to charge)?
    std::optional<PlanRecord> find_plan(std::string_view id);

    // INR per USD, in millionths.
    FxRecord set_exchange_rate(uint64_t inr_per_usd_micro);
    std::optional<FxRecord> exchange_rate();

    MDB_env *env() noexcept { return env_.handle(); }

private:
    std::optional<KeyRecord> find_key_in(MDB_txn *txn, const Id &key_id);
    std::optional<Account> find_account_in(MDB_txn *txn, const Id &id);

    lmdb::env env_;
    lmdb::dbi keys_by_hash_{0};
    lmdb::dbi keys_{0};
    lmdb::dbi account_keys_{0};
    lmdb::dbi accounts_{0};
    lmdb::dbi console_tokens_{0};
    lmdb::dbi plans_{0};
    lmdb::dbi meta_{0};
    std::function<int64_t()> clock_;
    std::chrono::milliseconds write_wait_limit_{0};
};

// Input rules shared by every writer; throw StoreError(kInvalid, field, ...).
void validate_name(std::string_view name);
void validate_scopes(const std::vector<std::string> &scopes);
void validate_rate(uint32_t rpm, const char *field);
// The whole catalog: ids, names, prices, features, one popular plan, distinct
// sortOrder values. Fields are named "plans[3].priceInr" style.
void validate_catalog(const std::vector<PlanRecord> &plans);

int64_t wall_clock_ms();

}  // namespace keyauth
