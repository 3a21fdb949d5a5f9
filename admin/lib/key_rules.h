// Whether a key may be active: the one place that decides it. Every write
// path of the Store that can make a key active (create, update, roll,
// resume, and whatever comes next) asks admit_activation or admit_resume
// before it writes, and none decides it on its own. The edge's check
// (src/core/edge_auth.cc) only reads what these rules let through.
//
// The invariants, checked by tests/invariants_model_test.cc:
// - active keys of an account <= its maxKeys whenever a key becomes active
//   (a key made active again, by an expiry cleared or moved or by a resume,
//   counts like a new one); lowering maxKeys leaves existing keys alone;
// - a roll chain counts once: its active keys (a predecessor in its grace
//   and its successor) are one key toward maxKeys, and a chain has at most
//   two live secrets (rolling a key ends its own predecessor's grace);
// - an active key's scopes are within the account's allowedScopes at the
//   moment it becomes active (a roll's successor and a resume included);
// - a rolled predecessor is active only until its grace ends, and nothing
//   makes it active again (its expiry cannot be changed);
// - revoked is final;
// - an expiry is a real instant: the epoch is a time in the past, not
//   "never" (never is its own value, nullopt here and 0 in the record).
// And who may change a key's quota: one an operator set is managed (sold
// credits) and the console may only lower it (set_quota).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "audit.h"
#include "ids.h"
#include "records.h"
#include "store_backend.h"

namespace keyauth {

// Not revoked, and its expiry (if any) still ahead.
bool key_active(const KeyRecord &key, int64_t now);

// An expiry is at most ten years ahead.
constexpr int64_t kMaxExpiryAheadMs = 3652LL * 86400 * 1000;

// When a key stops, as the API speaks of it: nullopt is never.
using Expiry = std::optional<int64_t>;
// The record's encoding of it (0: never) and back.
int64_t stored_expiry(const Expiry &at);
Expiry expiry_of(const KeyRecord &key);
// A given expiry must be in the future and at most ten years on
// (kInvalid "expiresAt"); never is always fine.
void validate_expiry(const Expiry &at, int64_t now);

// kForbidden ACCOUNT_SUSPENDED unless the account is active.
void require_account_active(const Id &id, const AccountRecord &account);
// kForbidden SCOPE_NOT_ALLOWED unless one of the account's allowed scopes
// grants each of `scopes` ("ip:*" allows "ip:read"); no allowed scopes: any.
void require_scopes_allowed(const AccountRecord &account, const std::vector<std::string> &scopes);
// kConflict KEY_REVOKED for a revoked key: revoked is final.
void require_not_revoked(const KeyRecord &key);
// kConflict KEY_ALREADY_ROLLED for a rolled predecessor: its expiry is the
// end of its grace, and moving or clearing it would make it live again.
void require_expiry_changeable(const KeyRecord &key);

// The roll chain a key belongs to: the first key's id (its rate id, which
// every successor copies), its own id when it was never rolled.
Id chain_of(const KeyRecord &key);

// Quotas set by these actors are managed: every actor but the console (an
// operator at keyauthctl, the admin API and whatever else sells credits).
bool manages_quotas(const Actor &actor);

// The key's quota becomes `to`, as `actor` asks. A quota a managing actor
// sets is managed, one it removes is no longer; the console may lower a
// managed quota (it stays managed), never raise it, move it to another
// period or remove it (kForbidden QUOTA_MANAGED, field "quota"); a budget
// the console set itself stays the console's to change.
void set_quota(KeyRecord &key, const Quota &to, const Actor &actor);

// Keys that become active in one write, all with the same scopes.
struct Activation {
    uint32_t keys = 0;        // how many become active
    std::optional<Id> chain;  // the roll chain they join (a roll's successor, a
                              // key made active again); none: each starts its own
    int32_t live_change = 0;  // the change in the account's keys not revoked
};

// Admits an activation into `account` (read under the write's guard):
// the account active, `scopes` allowed, and its active keys after the
// write, each roll chain counted once, at most max_keys, the account's
// effective cap (its own or its plan's, read in the same write:
// effective_of) (kConflict KEY_LIMIT_REACHED). A roll adds no key to a
// chain already active, but is admitted only within the cap. Updates the
// account's live-key count; the caller writes the record back.
void admit_activation(RecordReader &r, const Id &id, AccountRecord &account,
                      const std::vector<std::string> &scopes, const Activation &a, int64_t now,
                      uint32_t max_keys);

// A resume makes the account's active keys usable again, so they are
// admitted as if new: at most maxKeys of them (roll chains), each within allowedScopes
// (an operator who lowered either while the account was suspended revokes
// keys or widens the account first).
void admit_resume(RecordReader &r, const Id &id, AccountRecord &account, int64_t now, uint32_t max_keys);

// Rolling a key ends the grace of its own predecessor, if it is still in it:
// true if `predecessor` was live (its expiry is now `now`), so that a roll
// chain never has more than two live secrets.
bool end_grace(KeyRecord &predecessor, int64_t now);

// records.h's effective_entitlements over owned records (plan: none if the
// account has none or its plan is gone): the one rule, not a second copy.
Entitlements effective_of(const AccountRecord &account, const PlanRecord *plan);

}  // namespace keyauth
