#include "store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "key_format.h"
#include "keyauth_schema.h"
#include "le.h"
#include "money.h"
#include "sha256.h"

namespace keyauth {
namespace {

template <size_t N>
std::string_view bytes(const std::array<unsigned char, N> &a) {
    return {reinterpret_cast<const char *>(a.data()), N};
}

std::string account_key(const Id &account, const Id &key) {
    std::string k(bytes(account));
    k.append(bytes(key));
    return k;
}

[[noreturn]] void invalid(const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, msg);
}

[[noreturn]] void corrupt(const std::string &msg) {
    throw StoreError(StoreError::Kind::kCorrupt, "", msg);
}

}  // namespace

int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

// Decoders of the records a read returns; a record that does not decode is
// corruption, named by what it belongs to.
Account account_from(const Id &id, std::string_view v) {
    AccountRecordView view;
    if (decode_account_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("account " + id_to_string(kAccountIdPrefix, id) + " has an unreadable record");
    return Account{id, AccountRecord{view.status, view.entitlement_rpm, view.created_ms,
                                     std::string(view.name)}};
}

std::optional<Account> account_in(RecordReader &r, const Id &id) {
    auto v = r.get(Table::kAccounts, bytes(id));
    if (!v) return std::nullopt;
    return account_from(id, *v);
}

// A key found through the keys index: its hash, its record's bytes (valid
// as long as the reader) and the record.
struct FoundKey {
    std::string_view hash;
    std::string_view stored;
    KeyRecord record;
};

std::optional<FoundKey> key_in(RecordReader &r, const Id &key_id) {
    auto hash = r.get(Table::kKeys, bytes(key_id));
    if (!hash) return std::nullopt;
    auto stored = r.get(Table::kKeysByHash, *hash);
    if (!stored) corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has no record");
    KeyRecordView view;
    if (decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
        corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has an unreadable record");
    return FoundKey{*hash, *stored, view.to_owned()};
}

PlanRecord plan_from(std::string_view id, std::string_view v) {
    PlanRecordView view;
    if (decode_plan_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("plan \"" + std::string(id) + "\" has an unreadable record");
    return view.to_owned(id);
}

std::string le_bytes(uint64_t n) {
    unsigned char buf[8];
    store_le<uint64_t>(buf, n);
    return std::string(reinterpret_cast<const char *>(buf), sizeof buf);
}

}  // namespace

Store::Store(const std::string &path, size_t map_size)
    : Store(std::make_unique<LmdbBackend>(path, map_size)) {}

size_t Store::max_keys_per_write() const { return std::min<size_t>(backend_->max_keys_per_write(), 10'000'000); }

Store::Store(std::unique_ptr<StoreBackend> backend)
    : backend_(std::move(backend)), clock_(wall_clock_ms) {}

// Writers that collided (etcd: several keyauthd creating keys at once)
// retry at random moments, over a window that doubles, so that they do not
// collide again in step.
static void back_off(int attempt) {
    static std::atomic<uint32_t> seed{std::random_device{}()};
    std::minstd_rand rng(seed.fetch_add(0x9e3779b9u, std::memory_order_relaxed));
    const int window_ms = std::min(1 << attempt, 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % (window_ms + 1)));
}

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
        if (w->apply(m)) return answer;
        if (attempt == kWriteAttempts)
            throw StoreError(StoreError::Kind::kBusy, "",
                             "the store kept changing under this write; nothing was written, retry");
        w.reset();
        back_off(attempt);
    }
}

CreatedAccount Store::create_account(std::string_view name, uint32_t entitlement_rpm) {
    validate_name(name);
    validate_rate(entitlement_rpm, "entitlement");
    return write([&](RecordReader &, Mutation &m) {
        int64_t now = clock_();
        CreatedAccount out;
        out.account.id = generate_id(now);
        out.account.record = AccountRecord{KA_ACCOUNT_ACTIVE, entitlement_rpm, now, std::string(name)};
        out.console_token = generate_secret(kConsoleTokenPrefix);
        Digest token_hash = sha256(out.console_token);
        m.expect(Table::kAccounts, bytes(out.account.id), std::nullopt);
        m.expect(Table::kConsoleTokens, bytes(token_hash), std::nullopt);
        m.put(Table::kAccounts, bytes(out.account.id), encode_account_record(out.account.record));
        m.put(Table::kConsoleTokens, bytes(token_hash), encode_token_record(out.account.id));
        return out;
    });
}

std::optional<Account> Store::find_account(const Id &id) {
    return account_in(*backend_->read(), id);
}

std::vector<Account> Store::list_accounts() {
    std::vector<Account> out;
    backend_->read()->scan(Table::kAccounts, "", "", [&](std::string_view key, std::string_view v) {
        Id id{};
        if (key.size() != id.size()) corrupt("account id of unexpected length");
        std::memcpy(id.data(), key.data(), id.size());
        out.push_back(account_from(id, v));
        return true;
    });
    return out;
}

Account Store::set_entitlement(const Id &id, uint32_t entitlement_rpm) {
    validate_rate(entitlement_rpm, "entitlement");
    return write([&](RecordReader &r, Mutation &m) {
        auto stored = r.get(Table::kAccounts, bytes(id));
        if (!stored)
            throw StoreError(StoreError::Kind::kNotFound, "account",
                             "no account " + id_to_string(kAccountIdPrefix, id));
        Account acc = account_from(id, *stored);
        acc.record.entitlement_rpm = entitlement_rpm;
        m.expect(Table::kAccounts, bytes(id), stored);
        m.put(Table::kAccounts, bytes(id), encode_account_record(acc.record));
        return acc;
    });
}

std::optional<Id> Store::account_for_console_token(std::string_view token) {
    if (!secret_format_ok(token, kConsoleTokenPrefix)) return std::nullopt;
    Digest h = sha256(token);
    auto r = backend_->read();
    auto v = r->get(Table::kConsoleTokens, bytes(h));
    if (!v) return std::nullopt;
    Id id{};
    if (decode_token_record(v->data(), v->size(), id) != DecodeStatus::kOk)
        corrupt("console token record is unreadable");
    auto acc = account_in(*r, id);
    if (!acc || acc->record.status != KA_ACCOUNT_ACTIVE) return std::nullopt;
    return id;
}

CreatedKey Store::create_key(const Id &account, std::string_view name,
                             const std::vector<std::string> &scopes, uint32_t requested_rpm) {
    return std::move(create_keys(account, name, scopes, requested_rpm, 1).front());
}

std::vector<CreatedKey> Store::create_keys(const Id &account, std::string_view name,
                                           const std::vector<std::string> &scopes,
                                           uint32_t requested_rpm, size_t count) {
    validate_name(name);
    validate_scopes(scopes);
    validate_rate(requested_rpm, "rateLimitPerMinute");
    if (count < 1 || count > 10'000'000) invalid("count", "count must be from 1 to 10000000");
    if (count > backend_->max_keys_per_write())
        invalid("count", "this store takes at most " + std::to_string(backend_->max_keys_per_write()) +
                             " keys in one write; create more in batches");
    return write([&](RecordReader &r, Mutation &m) {
        auto owner = r.get(Table::kAccounts, bytes(account));
        if (!owner)
            throw StoreError(StoreError::Kind::kNotFound, "account",
                             "no account " + id_to_string(kAccountIdPrefix, account));
        m.expect(Table::kAccounts, bytes(account), owner);
        // Key ids must grow in creation order (lists page by id), also within
        // one millisecond and across writers: step past the newest id stored,
        // and guard that none newer appears before this write applies.
        Id last{};
        std::optional<std::string> newest = r.last_key(Table::kKeys);
        if (newest && newest->size() == last.size()) std::memcpy(last.data(), newest->data(), last.size());
        m.expect_none_after(Table::kKeys, newest.value_or(""));
        m.changes.reserve(count);
        m.guards.reserve(count + 2);
        std::vector<CreatedKey> made(count);
        for (CreatedKey &out : made) {
            int64_t now = clock_();
            out.secret = generate_secret(kKeyPrefix);
            Digest hash = sha256(out.secret);
            KeyRecord &rec = out.key;
            rec.status = KA_KEY_ACTIVE;
            rec.requested_rpm = requested_rpm;
            rec.key_id = generate_id(now);
            if (rec.key_id <= last) {
                rec.key_id = last;
                for (size_t i = rec.key_id.size(); i-- > 0 && ++rec.key_id[i] == 0;) {
                }
            }
            last = rec.key_id;
            rec.account_id = account;
            rec.created_ms = now;
            rec.scopes = scopes;
            rec.prefix = out.secret.substr(0, kDisplayPrefixLen);
            rec.name = std::string(name);
            m.expect(Table::kKeysByHash, bytes(hash), std::nullopt);
            m.put(Table::kKeysByHash, bytes(hash), encode_key_record(rec));
        }
        return made;
    });
}

std::optional<KeyRecord> Store::find_key(const Id &key_id) {
    auto found = key_in(*backend_->read(), key_id);
    if (!found) return std::nullopt;
    return std::move(found->record);
}

KeyPage Store::list_keys(const Id &account, size_t limit, const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto r = backend_->read();
    const std::string start = after ? account_key(account, *after) : std::string(bytes(account));
    const std::string_view owner = bytes(account);
    KeyPage page;
    r->scan(Table::kAccountKeys, owner, start, [&](std::string_view key, std::string_view hash) {
        if (after && key == start) return true;  // the cursor's own key: listed already
        if (key.size() != KA_ACCOUNT_KEY_LEN || key.substr(0, KA_ID_LEN) != owner) return false;
        if (page.keys.size() == limit) {
            page.next = page.keys.back().key_id;
            return false;
        }
        auto stored = r->get(Table::kKeysByHash, hash);
        if (!stored) corrupt("account key index points at no record");
        KeyRecordView view;
        if (decode_key_record(stored->data(), stored->size(), view) != DecodeStatus::kOk)
            corrupt("unreadable key record in account index");
        page.keys.push_back(view.to_owned());
        return true;
    });
    return page;
}

// catalog_version is the plans table's guard: every write of plans bumps it,
// so an import computed from an older catalog never applies over a newer one.
void Store::import_plans(const std::vector<PlanRecord> &plans) {
    validate_catalog(plans);
    write([&](RecordReader &r, Mutation &m) {
        auto version = r.get(Table::kMeta, KA_META_CATALOG_VERSION);
        m.expect(Table::kMeta, KA_META_CATALOG_VERSION, version);
        std::set<std::string_view> kept;
        for (const auto &p : plans) kept.insert(p.id);
        r.scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view) {
            if (kept.count(id) == 0) m.erase(Table::kPlans, id);
            return true;
        });
        for (const auto &p : plans) m.put(Table::kPlans, p.id, encode_plan_record(p));
        uint64_t n = version && version->size() == 8
                         ? load_le<uint64_t>(reinterpret_cast<const unsigned char *>(version->data()))
                         : 0;
        m.put(Table::kMeta, KA_META_CATALOG_VERSION, le_bytes(n + 1));
        return true;
    });
}

std::vector<PlanRecord> Store::list_plans() {
    std::vector<PlanRecord> out;
    backend_->read()->scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view v) {
        out.push_back(plan_from(id, v));
        return true;
    });
    std::sort(out.begin(), out.end(),
              [](const PlanRecord &a, const PlanRecord &b) { return a.sort_order < b.sort_order; });
    return out;
}

std::optional<PlanRecord> Store::find_plan(std::string_view id) {
    if (id.empty() || id.size() > KA_PLAN_ID_MAX_LEN) return std::nullopt;
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kPlans, id);
    if (!v) return std::nullopt;
    return plan_from(id, *v);
}

FxRecord Store::set_exchange_rate(uint64_t inr_per_usd_micro) {
    if (inr_per_usd_micro == 0 || inr_per_usd_micro > kMaxRateMicro)
        invalid("rate", "the rate must be a positive decimal of at most 1000000 INR per USD");
    return write([&](RecordReader &, Mutation &m) {
        FxRecord rec{inr_per_usd_micro, clock_()};
        m.put(Table::kMeta, KA_META_FX_USD_INR, encode_fx_record(rec));  // the newest rate wins
        return rec;
    });
}

std::optional<FxRecord> Store::exchange_rate() {
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kMeta, KA_META_FX_USD_INR);
    if (!v) return std::nullopt;
    FxRecord rec;
    if (decode_fx_record(v->data(), v->size(), rec) != DecodeStatus::kOk)
        corrupt("the exchange rate record is unreadable");
    return rec;
}

KeyRecord Store::revoke_key(const std::optional<Id> &owner, const Id &key_id) {
    return write([&](RecordReader &r, Mutation &m) {
        auto found = key_in(r, key_id);
        if (!found || (owner && found->record.account_id != *owner))
            throw StoreError(StoreError::Kind::kNotFound, "id",
                             "no key " + id_to_string(kKeyIdPrefix, key_id));
        KeyRecord rec = std::move(found->record);
        if (rec.status == KA_KEY_REVOKED) return rec;  // nothing to write
        rec.status = KA_KEY_REVOKED;
        rec.revoked_ms = clock_();
        m.expect(Table::kKeysByHash, found->hash, found->stored);
        m.put(Table::kKeysByHash, found->hash, encode_key_record(rec));
        return rec;
    });
}

}  // namespace keyauth
