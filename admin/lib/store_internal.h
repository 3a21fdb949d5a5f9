// Inside the store (store*.cc only): the write machinery every write goes
// through (Store::write) and the rules that more than one of the store's
// files applies, each defined once: the account, key and catalog writes call
// these, never a copy of their own.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mutation.h"
#include "store.h"
#include "store_backend.h"

namespace keyauth {
namespace store_detail {

template <size_t N>
std::string_view bytes(const std::array<unsigned char, N> &a) {
    return {reinterpret_cast<const char *>(a.data()), N};
}

[[noreturn]] void invalid(const char *field, const std::string &msg);
[[noreturn]] void corrupt(const std::string &msg);

// Decoders of the records a read returns; a record that does not decode is
// corruption, named by what it belongs to.
Account account_from(const Id &id, std::string_view v);
PlanRecord plan_from(std::string_view id, std::string_view v);

// An account read within a write, with the bytes it was read as (its guard).
struct FoundAccount {
    std::string_view stored;
    Account account;
};

// kNotFound if there is no such account.
FoundAccount account_for_write(RecordReader &r, const Id &id);

// An account's plan as a write reads it, guarded: none if the account has
// no plan or the catalog does not hold it.
std::optional<PlanRecord> plan_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc);

// The account's effective cap on active keys, its plan read (and guarded) in this write.
uint32_t cap_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc);

void validate_grace(int64_t seconds, const char *field);

// The account's external id set to `next` (none: removed) within a write,
// unique across accounts (kConflict EXTERNAL_ID_TAKEN); the change goes
// into `e`, nothing when it is the same (store_external_ids.cc).
void validate_external_id(const std::optional<std::string> &external_id);
void set_external_id(RecordReader &r, Mutation &m, const Id &account, const std::optional<std::string> &next,
                     AuditEvent &e);
void validate_quota(const Quota &q, bool total_ok, const char *field);

// The current key prefix (NAME + "_") for a write that makes a key, guarded:
// a prefix set meanwhile makes the write read again (store_config.cc).
std::string key_prefix_for_write(RecordReader &r, Mutation &m);

// An audit event for the write being computed, in the trail of `account`
// (zero: the operator's own); put_audit gives it its id (store_audit.cc).
AuditEvent &audit(std::vector<AuditEvent> &events, const Actor &actor, int64_t now, const Id &account,
                  const char *action, const char *target_type, std::string target_id);
void put_audit(RecordReader &r, Mutation &m, std::vector<AuditEvent> &events);

// A reported secret's part of Store::report_leak's write, each beside the
// records it changes; `hash` is SHA-256 of the secret. Each adds its audit
// events to `events` (store_leaks.cc puts them).
struct LeakWrite {
    LeakAction action;
    const LeakReportOrigin &origin;
    const Actor &actor;
    int64_t now;
    std::vector<AuditEvent> &events;
};
LeakOutcome key_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w);
LeakOutcome admin_token_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w);
LeakOutcome console_token_leak_in(RecordReader &r, Mutation &m, std::string_view hash, const LeakWrite &w);
// The audit change a leak report makes: "leak" from none to {source, url}.
void note_leak(AuditEvent &e, const LeakReportOrigin &origin);

// Writers that collided (etcd: several keyauthd creating keys at once)
// retry at random moments, over a window that doubles, so that they do not
// collide again in step.
void back_off(int attempt);

}  // namespace store_detail

// One write: `plan` reads what the change depends on through the attempt,
// records in the mutation the records to write and the guards they rest on,
// and returns the caller's answer. The backend applies the mutation only if
// the guards still hold; otherwise the plan runs again from fresh reads (new
// ids and secrets included), a bounded number of times.
template <class Plan>
auto Store::write(Plan &&plan) {
    for (int attempt = 1;; attempt++) {
        std::unique_ptr<WriteAttempt> w = backend_->begin_write();
        Mutation m;
        auto answer = plan(static_cast<RecordReader &>(*w), m);
        const auto started = std::chrono::steady_clock::now();
        const bool applied = w->apply(m);
        if (write_observer_) {
            write_observer_(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        }
        if (applied) return answer;
        if (attempt == kWriteAttempts)
            throw StoreError(StoreError::Kind::kBusy, "",
                             "the store kept changing under this write; nothing was written, retry");
        w.reset();
        store_detail::back_off(attempt);
    }
}

}  // namespace keyauth
