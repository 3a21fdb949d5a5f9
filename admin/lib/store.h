// The writer side of the LMDB schema, shared by keyauthctl and keyauthd:
// accounts, console tokens, API keys, plans and the exchange rate. The
// business rules (validation, ids, hashing, caps) live here once; each write
// is computed as a Mutation (mutation.h) from what it read, and a backend
// (store_backend.h) applies it all or nothing, durably (committed with fsync
// before the method returns), so an acknowledged write survives a crash.
// Secrets are hashed before they touch the store and are returned to the
// caller exactly once.
#pragma once

// The LMDB backend's errors reach callers as they are: lmdb::map_full_error
// for a full map, lmdb::error (ENOSPC, EIO, MDB_MAP_RESIZED) for the rest.
#include <lmdb++.h>

#include <cstdint>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "lmdb_backend.h"
#include "records.h"
#include "store_backend.h"
#include "store_error.h"
#include "validation.h"

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

class Store {
public:
    static constexpr size_t kDefaultMapSize = LmdbBackend::kDefaultMapSize;
    static constexpr size_t kMaxPageSize = 1000;
    // A write whose guards failed is computed again from fresh reads this
    // many times in all, then given up with StoreError kBusy.
    static constexpr int kWriteAttempts = 8;

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

    CreatedAccount create_account(std::string_view name, uint32_t entitlement_rpm);
    std::optional<Account> find_account(const Id &id);
    std::vector<Account> list_accounts();
    Account set_entitlement(const Id &id, uint32_t entitlement_rpm);
    std::optional<Id> account_for_console_token(std::string_view token);

    CreatedKey create_key(const Id &account, std::string_view name,
                          const std::vector<std::string> &scopes, uint32_t requested_rpm);
    // `count` keys alike in one transaction (provisioning, load tests), at
    // most max_keys_per_write() (etcd: 40; a caller creating more pages).
    std::vector<CreatedKey> create_keys(const Id &account, std::string_view name,
                                        const std::vector<std::string> &scopes,
                                        uint32_t requested_rpm, size_t count);
    size_t max_keys_per_write() const;
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

private:
    // Computes a write with `plan(reads, mutation)` and applies it; see store.cc.
    template <class Plan>
    auto write(Plan &&plan);

    std::unique_ptr<StoreBackend> backend_;
    std::function<int64_t()> clock_;
};

int64_t wall_clock_ms();

}  // namespace keyauth
