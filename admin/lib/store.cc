// The store's construction, the write machinery's backoff (Store::write
// itself is a template, in store_internal.h), and the rules that the account,
// key and catalog writes share: their errors, the account and its plan as a
// write reads them, and the checks of a grace period and a quota.
#include "store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "keyauth_schema.h"
#include "store_internal.h"

namespace keyauth {

int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

Store::Store(const std::string &path, size_t map_size)
    : Store(std::make_unique<LmdbBackend>(path, map_size)) {}

Store::Store(std::unique_ptr<StoreBackend> backend)
    : backend_(std::move(backend)), clock_(wall_clock_ms) {}

namespace store_detail {

void back_off(int attempt) {
    static std::atomic<uint32_t> seed{std::random_device{}()};
    std::minstd_rand rng(seed.fetch_add(0x9e3779b9u, std::memory_order_relaxed));
    const int window_ms = std::min(1 << attempt, 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (window_ms + 1)));
}

[[noreturn]] void invalid(const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, msg);
}

[[noreturn]] void corrupt(const std::string &msg) {
    throw StoreError(StoreError::Kind::kCorrupt, "", msg);
}

namespace {

[[noreturn]] void no_account(const Id &id) {
    // coded, so that an API route that names an account in its body (POST
    // /v1/admin/webhooks' accountId) answers ACCOUNT_NOT_FOUND as the others do
    throw StoreError(StoreError::Kind::kNotFound, "account", "no account " + id_to_string(kAccountIdPrefix, id),
                     "ACCOUNT_NOT_FOUND");
}

}  // namespace

// Guarded like the account record: an import that changes or drops the
// plan makes the write compute again (issue 28).
std::optional<PlanRecord> plan_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc) {
    if (acc.plan_id.empty()) return std::nullopt;
    auto v = r.get(Table::kPlans, acc.plan_id);
    m.expect(Table::kPlans, acc.plan_id, v);
    if (!v) return std::nullopt;
    return plan_from(acc.plan_id, *v);
}

Account account_from(const Id &id, std::string_view v) {
    AccountRecordView view;
    if (decode_account_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("account " + id_to_string(kAccountIdPrefix, id) + " has an unreadable record");
    return Account{id, view.to_owned()};
}

FoundAccount account_for_write(RecordReader &r, const Id &id) {
    auto v = r.get(Table::kAccounts, std::string_view(reinterpret_cast<const char *>(id.data()), id.size()));
    if (!v) no_account(id);
    return FoundAccount{*v, account_from(id, *v)};
}

PlanRecord plan_from(std::string_view id, std::string_view v) {
    PlanRecordView view;
    if (decode_plan_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("plan \"" + std::string(id) + "\" has an unreadable record");
    return view.to_owned(id);
}

uint32_t cap_for_write(RecordReader &r, Mutation &m, const AccountRecord &acc) {
    auto plan = plan_for_write(r, m, acc);
    return effective_of(acc, plan ? &*plan : nullptr).max_keys;
}

void validate_grace(int64_t seconds, const char *field) {
    if (seconds < 0 || seconds > Store::kMaxGraceSeconds)
        invalid(field, std::string(field) + " must be an integer from 0 to 604800");
}

void validate_quota(const Quota &q, bool total_ok, const char *field) {
    if (!quota_ok(q, total_ok))
        invalid(field, std::string(field) + " must be null or 1 to " + std::to_string(KA_QUOTA_UNITS_MAX) +
                           " units a day or a month" + (total_ok ? ", or in total" : ""));
}

}  // namespace store_detail
}  // namespace keyauth
