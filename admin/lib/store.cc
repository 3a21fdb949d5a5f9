#include "store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>

#include "key_format.h"
#include "keyauth_schema.h"
#include "le.h"
#include "money.h"
#include "permissions.h"
#include "scope.h"
#include "sha256.h"

namespace keyauth {
namespace {

// Readers of old and new nginx workers overlap during a reload.
constexpr unsigned kMaxReaders = 1024;
// data.mdb and lock.mdb: the nginx worker's group must write lock.mdb (LMDB
// readers take their reader slot there). Applied whatever the umask.
constexpr mdb_mode_t kFileMode = 0660;
constexpr mode_t kDirMode = 02770;

bool exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

// A write transaction. Unlike lmdb::txn, it forgets its handle when commit
// fails: LMDB has already aborted and freed the transaction then (MDB_MAP_FULL
// at commit, for one), and aborting it again is a double free.
class WriteTxn {
public:
    WriteTxn(MDB_env *env, std::chrono::milliseconds wait_limit) {
        const auto asked = std::chrono::steady_clock::now();
        int rc = mdb_txn_begin(env, nullptr, 0, &txn_);
        if (rc != 0) lmdb::error::raise("mdb_txn_begin", rc);
        if (wait_limit.count() > 0 && std::chrono::steady_clock::now() - asked > wait_limit) {
            mdb_txn_abort(txn_);
            txn_ = nullptr;
            throw StoreError(StoreError::Kind::kBusy, "",
                             "another writer held the store too long; nothing was written, retry");
        }
    }
    ~WriteTxn() {
        if (txn_ != nullptr) mdb_txn_abort(txn_);
    }
    WriteTxn(const WriteTxn &) = delete;
    WriteTxn &operator=(const WriteTxn &) = delete;

    operator MDB_txn *() const noexcept { return txn_; }

    void commit() {
        MDB_txn *txn = txn_;
        txn_ = nullptr;
        int rc = mdb_txn_commit(txn);
        if (rc != 0) lmdb::error::raise("mdb_txn_commit", rc);
    }

private:
    MDB_txn *txn_ = nullptr;
};

lmdb::val val_of(const void *p, size_t n) { return lmdb::val(p, n); }
lmdb::val val_of(std::string_view s) { return lmdb::val(s.data(), s.size()); }

std::string_view view_of(const lmdb::val &v) { return std::string_view(v.data(), v.size()); }

std::string account_key(const Id &account, const Id &key) {
    std::string k(reinterpret_cast<const char *>(account.data()), account.size());
    k.append(reinterpret_cast<const char *>(key.data()), key.size());
    return k;
}

[[noreturn]] void invalid(const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, msg);
}

[[noreturn]] void corrupt(const std::string &msg) {
    throw StoreError(StoreError::Kind::kCorrupt, "", msg);
}

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; }
        else return false;
        if (i + n >= s.size()) return false;
        for (size_t k = 1; k <= n; k++) {
            unsigned char d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xc0) != 0x80) return false;
            cp = cp << 6 | (d & 0x3f);
        }
        static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

void mkdir_p(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        const bool last = pos == std::string::npos;
        if (::mkdir(cur.c_str(), last ? kDirMode : 0755) == 0) {
            if (last) ::chmod(cur.c_str(), kDirMode);  // not narrowed by the umask
        } else if (errno != EEXIST) {
            throw std::runtime_error("cannot create directory " + cur + ": " + std::strerror(errno));
        }
    }
}

}  // namespace

int64_t wall_clock_ms() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

void validate_name(std::string_view name) {
    if (name.empty()) invalid("name", "name must not be empty");
    if (name.size() > KA_NAME_MAX_LEN)
        invalid("name", "name must be at most " + std::to_string(KA_NAME_MAX_LEN) + " bytes");
    if (!valid_utf8(name)) invalid("name", "name must be valid UTF-8");
    for (size_t i = 0; i < name.size(); i++) {
        auto c = static_cast<unsigned char>(name[i]);
        auto next = [&](size_t k) { return static_cast<unsigned char>(name[i + k]); };
        // C0 and DEL; C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F)
        if (c < 0x20 || c == 0x7f || (c == 0xc2 && next(1) <= 0x9f)) {
            invalid("name", "name must not contain control characters");
        }
        // Bidi embeddings and overrides U+202A..U+202E (E2 80 AA..AE) and
        // isolates U+2066..U+2069 (E2 81 A6..A9): they make a name display
        // as another one in the console. The UTF-8 is valid, so the bytes
        // looked at exist.
        if (c == 0xe2 && ((next(1) == 0x80 && next(2) >= 0xaa && next(2) <= 0xae) ||
                          (next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9))) {
            invalid("name", "name must not contain bidirectional control characters");
        }
    }
}

void validate_scopes(const std::vector<std::string> &scopes) {
    if (scopes.empty()) invalid("scopes", "scopes must name at least one scope");
    if (scopes.size() > KA_SCOPES_MAX)
        invalid("scopes", "at most " + std::to_string(KA_SCOPES_MAX) + " scopes");
    std::set<std::string_view> seen;
    for (const auto &s : scopes) {
        if (!scope_syntax_ok(s))
            invalid("scopes", "scope \"" + s.substr(0, KA_SCOPE_MAX_LEN) +
                                  "\" is not <resource>:<action> ([a-z0-9_.-]{1,31}, action may be *)");
        if (!seen.insert(s).second) invalid("scopes", "scope \"" + s + "\" is listed twice");
    }
}

void validate_rate(uint32_t rpm, const char *field) {
    if (rpm < 1 || rpm > kMaxRatePerMinute)
        invalid(field, std::string(field) + " must be an integer from 1 to " +
                           std::to_string(kMaxRatePerMinute));
}

void validate_catalog(const std::vector<PlanRecord> &plans) {
    if (plans.empty()) invalid("plans", "the catalog must hold at least one plan");
    if (plans.size() > 1000) invalid("plans", "the catalog may hold at most 1000 plans");
    std::set<std::string> ids;
    std::set<int32_t> orders;
    size_t popular = 0;
    for (size_t i = 0; i < plans.size(); i++) {
        const PlanRecord &p = plans[i];
        const std::string at = "plans[" + std::to_string(i) + "]";
        auto fail = [&](const std::string &field, const std::string &msg) {
            throw StoreError(StoreError::Kind::kInvalid, at + "." + field, at + "." + field + ": " + msg);
        };
        bool id_ok = !p.id.empty() && p.id.size() <= KA_PLAN_ID_MAX_LEN;
        for (char c : p.id) id_ok = id_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
        if (!id_ok) fail("id", "must be 1-64 characters of [a-z0-9-]");
        if (!ids.insert(p.id).second) fail("id", "\"" + p.id + "\" is used twice");
        try {
            validate_name(p.name);
        } catch (const StoreError &e) {
            fail("name", e.what());
        }
        if (p.price_paise == 0) fail("priceInr", "must be positive");
        if (p.price_paise > 10'000'000'000ULL * 100) fail("priceInr", "is too large");
        if (p.features.empty() || p.features.size() > KA_FEATURES_MAX)
            fail("features", "must hold 1 to " + std::to_string(KA_FEATURES_MAX) + " entries");
        for (const auto &f : p.features) {
            if (f.empty() || f.size() > KA_FEATURE_MAX_LEN || !valid_utf8(f))
                fail("features", "each feature must be 1-200 bytes of UTF-8");
        }
        if (!orders.insert(p.sort_order).second)
            fail("sortOrder", std::to_string(p.sort_order) + " is used twice");
        popular += p.popular ? 1 : 0;
    }
    if (popular != 1)
        invalid("plans", "exactly one plan must be popular, not " + std::to_string(popular));
}

Store::Store(const std::string &path, size_t map_size)
    : env_(lmdb::env::create()), clock_(wall_clock_ms) {
    mkdir_p(path);
    require_private_store(path);  // before LMDB opens (or creates) a file
    const bool fresh = !exists(path + "/data.mdb");
    env_.set_max_dbs(KA_DB_COUNT);
    env_.set_max_readers(kMaxReaders);
    // No size before opening: LMDB then maps what the store was last written
    // with. The larger of that and map_size is kept, so that two writers asking
    // for different sizes (keyauthd --map-size, keyauthctl) never shrink the
    // map under data the other one wrote.
    env_.open(path.c_str(), 0, kFileMode);
    const size_t wanted = map_size != 0 ? map_size : fresh ? kDefaultMapSize : 0;
    MDB_envinfo info;
    mdb_env_info(env_.handle(), &info);
    if (info.me_mapsize < wanted) env_.set_mapsize(wanted);
    if (fresh) {
        ::chmod((path + "/data.mdb").c_str(), kFileMode);
        ::chmod((path + "/lock.mdb").c_str(), kFileMode);
    }
    int dead = 0;
    mdb_reader_check(env_.handle(), &dead);

    WriteTxn txn(env_.handle(), write_wait_limit_);
    keys_by_hash_ = lmdb::dbi::open(txn, KA_DB_KEYS_BY_HASH, MDB_CREATE);
    keys_ = lmdb::dbi::open(txn, KA_DB_KEYS, MDB_CREATE);
    account_keys_ = lmdb::dbi::open(txn, KA_DB_ACCOUNT_KEYS, MDB_CREATE);
    accounts_ = lmdb::dbi::open(txn, KA_DB_ACCOUNTS, MDB_CREATE);
    console_tokens_ = lmdb::dbi::open(txn, KA_DB_CONSOLE_TOKENS, MDB_CREATE);
    plans_ = lmdb::dbi::open(txn, KA_DB_PLANS, MDB_CREATE);
    meta_ = lmdb::dbi::open(txn, KA_DB_META, MDB_CREATE);

    std::string_view name = KA_META_SCHEMA_VERSION;
    lmdb::val k = val_of(name), v;
    if (meta_.get(txn, k, v)) {
        uint32_t version = v.size() == 4 ? load_le<uint32_t>(v.data<unsigned char>()) : 0;
        if (version != KA_SCHEMA_VERSION) {
            corrupt("schema version " + std::to_string(version) + " of " + path +
                    " is not supported (this build writes " + std::to_string(KA_SCHEMA_VERSION) +
                    ")");
        }
    } else {
        unsigned char buf[4];
        store_le<uint32_t>(buf, KA_SCHEMA_VERSION);
        lmdb::val nv = val_of(buf, sizeof buf);
        meta_.put(txn, k, nv);
    }
    txn.commit();
}

std::optional<Account> Store::find_account_in(MDB_txn *txn, const Id &id) {
    lmdb::val k = val_of(id.data(), id.size()), v;
    if (!accounts_.get(txn, k, v)) return std::nullopt;
    AccountRecordView view;
    if (decode_account_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("account " + id_to_string(kAccountIdPrefix, id) + " has an unreadable record");
    return Account{id, AccountRecord{view.status, view.entitlement_rpm, view.created_ms,
                                     std::string(view.name)}};
}

CreatedAccount Store::create_account(std::string_view name, uint32_t entitlement_rpm) {
    validate_name(name);
    validate_rate(entitlement_rpm, "entitlement");
    int64_t now = clock_();
    CreatedAccount out;
    out.account.id = generate_id(now);
    out.account.record = AccountRecord{KA_ACCOUNT_ACTIVE, entitlement_rpm, now, std::string(name)};
    out.console_token = generate_secret(kConsoleTokenPrefix);
    Digest token_hash = sha256(out.console_token);

    WriteTxn txn(env_.handle(), write_wait_limit_);
    std::string rec = encode_account_record(out.account.record);
    lmdb::val k = val_of(out.account.id.data(), out.account.id.size()), v = val_of(rec);
    if (!accounts_.put(txn, k, v, MDB_NOOVERWRITE))
        throw StoreError(StoreError::Kind::kConflict, "", "account id collision; retry");
    std::string tok = encode_token_record(out.account.id);
    lmdb::val tk = val_of(token_hash.data(), token_hash.size()), tv = val_of(tok);
    console_tokens_.put(txn, tk, tv, MDB_NOOVERWRITE);
    txn.commit();
    return out;
}

std::optional<Account> Store::find_account(const Id &id) {
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    return find_account_in(txn, id);
}

std::vector<Account> Store::list_accounts() {
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    auto cur = lmdb::cursor::open(txn, accounts_);
    std::vector<Account> out;
    lmdb::val k, v;
    for (bool ok = cur.get(k, v, MDB_FIRST); ok; ok = cur.get(k, v, MDB_NEXT)) {
        Id id{};
        if (k.size() != id.size()) corrupt("account id of unexpected length");
        std::memcpy(id.data(), k.data(), id.size());
        out.push_back(*find_account_in(txn, id));
    }
    return out;
}

Account Store::set_entitlement(const Id &id, uint32_t entitlement_rpm) {
    validate_rate(entitlement_rpm, "entitlement");
    WriteTxn txn(env_.handle(), write_wait_limit_);
    auto acc = find_account_in(txn, id);
    if (!acc)
        throw StoreError(StoreError::Kind::kNotFound, "account",
                         "no account " + id_to_string(kAccountIdPrefix, id));
    acc->record.entitlement_rpm = entitlement_rpm;
    std::string rec = encode_account_record(acc->record);
    lmdb::val k = val_of(id.data(), id.size()), v = val_of(rec);
    accounts_.put(txn, k, v);
    txn.commit();
    return *acc;
}

std::optional<Id> Store::account_for_console_token(std::string_view token) {
    if (!secret_format_ok(token, kConsoleTokenPrefix)) return std::nullopt;
    Digest h = sha256(token);
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    lmdb::val k = val_of(h.data(), h.size()), v;
    if (!console_tokens_.get(txn, k, v)) return std::nullopt;
    Id id{};
    if (decode_token_record(v.data(), v.size(), id) != DecodeStatus::kOk)
        corrupt("console token record is unreadable");
    auto acc = find_account_in(txn, id);
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
    WriteTxn txn(env_.handle(), write_wait_limit_);
    if (!find_account_in(txn, account))
        throw StoreError(StoreError::Kind::kNotFound, "account",
                         "no account " + id_to_string(kAccountIdPrefix, account));
    // Key ids must grow in creation order (lists page by id), also within one
    // millisecond and across writers: the write lock serialises us, so step
    // past the newest id stored.
    Id last{};
    {
        auto cur = lmdb::cursor::open(txn, keys_);
        lmdb::val k;
        if (cur.get(k, nullptr, MDB_LAST) && k.size() == last.size()) {
            std::memcpy(last.data(), k.data(), last.size());
        }
    }
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
        std::string encoded = encode_key_record(rec);
        lmdb::val hk = val_of(hash.data(), hash.size()), hv = val_of(encoded);
        lmdb::val ik = val_of(rec.key_id.data(), rec.key_id.size());
        lmdb::val iv = val_of(hash.data(), hash.size());
        std::string ak = account_key(account, rec.key_id);
        lmdb::val akk = val_of(ak), akv = val_of(hash.data(), hash.size());
        if (!keys_by_hash_.put(txn, hk, hv, MDB_NOOVERWRITE) ||
            !keys_.put(txn, ik, iv, MDB_NOOVERWRITE) ||
            !account_keys_.put(txn, akk, akv, MDB_NOOVERWRITE))
            throw StoreError(StoreError::Kind::kConflict, "", "key id or hash collision; retry");
    }
    txn.commit();
    return made;
}

std::optional<KeyRecord> Store::find_key_in(MDB_txn *txn, const Id &key_id) {
    lmdb::val k = val_of(key_id.data(), key_id.size()), h;
    if (!keys_.get(txn, k, h)) return std::nullopt;
    lmdb::val rec;
    if (!keys_by_hash_.get(txn, h, rec))
        corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has no record");
    KeyRecordView view;
    if (decode_key_record(rec.data(), rec.size(), view) != DecodeStatus::kOk)
        corrupt("key " + id_to_string(kKeyIdPrefix, key_id) + " has an unreadable record");
    return view.to_owned();
}

std::optional<KeyRecord> Store::find_key(const Id &key_id) {
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    return find_key_in(txn, key_id);
}

KeyPage Store::list_keys(const Id &account, size_t limit, const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    auto cur = lmdb::cursor::open(txn, account_keys_);
    std::string start = after ? account_key(account, *after)
                              : std::string(reinterpret_cast<const char *>(account.data()),
                                            account.size());
    std::string_view owner(reinterpret_cast<const char *>(account.data()), account.size());
    KeyPage page;
    lmdb::val k = val_of(start), v;
    bool ok = cur.get(k, v, MDB_SET_RANGE);
    if (ok && after && view_of(k) == start) ok = cur.get(k, v, MDB_NEXT);
    for (; ok; ok = cur.get(k, v, MDB_NEXT)) {
        std::string_view key = view_of(k);
        if (key.size() != KA_ACCOUNT_KEY_LEN || key.substr(0, KA_ID_LEN) != owner) break;
        if (page.keys.size() == limit) {
            page.next = page.keys.back().key_id;
            break;
        }
        lmdb::val rec;
        if (!keys_by_hash_.get(txn, v, rec)) corrupt("account key index points at no record");
        KeyRecordView view;
        if (decode_key_record(rec.data(), rec.size(), view) != DecodeStatus::kOk)
            corrupt("unreadable key record in account index");
        page.keys.push_back(view.to_owned());
    }
    return page;
}

void Store::import_plans(const std::vector<PlanRecord> &plans) {
    validate_catalog(plans);
    WriteTxn txn(env_.handle(), write_wait_limit_);
    lmdb::dbi_drop(txn, plans_.handle(), false);  // empty it, keep the handle
    for (const auto &p : plans) {
        std::string rec = encode_plan_record(p);
        lmdb::val k = val_of(p.id), v = val_of(rec);
        plans_.put(txn, k, v);
    }
    std::string_view name = KA_META_CATALOG_VERSION;
    lmdb::val k = val_of(name), v;
    uint64_t version = meta_.get(txn, k, v) && v.size() == 8
                           ? load_le<uint64_t>(v.data<unsigned char>()) : 0;
    unsigned char buf[8];
    store_le<uint64_t>(buf, version + 1);
    lmdb::val nv = val_of(buf, sizeof buf);
    meta_.put(txn, k, nv);
    txn.commit();
}

std::vector<PlanRecord> Store::list_plans() {
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    auto cur = lmdb::cursor::open(txn, plans_);
    std::vector<PlanRecord> out;
    lmdb::val k, v;
    for (bool ok = cur.get(k, v, MDB_FIRST); ok; ok = cur.get(k, v, MDB_NEXT)) {
        PlanRecordView view;
        if (decode_plan_record(v.data(), v.size(), view) != DecodeStatus::kOk)
            corrupt("plan \"" + std::string(view_of(k)) + "\" has an unreadable record");
        out.push_back(view.to_owned(view_of(k)));
    }
    std::sort(out.begin(), out.end(),
              [](const PlanRecord &a, const PlanRecord &b) { return a.sort_order < b.sort_order; });
    return out;
}

std::optional<PlanRecord> Store::find_plan(std::string_view id) {
    if (id.empty() || id.size() > KA_PLAN_ID_MAX_LEN) return std::nullopt;
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    lmdb::val k = val_of(id), v;
    if (!plans_.get(txn, k, v)) return std::nullopt;
    PlanRecordView view;
    if (decode_plan_record(v.data(), v.size(), view) != DecodeStatus::kOk)
        corrupt("plan \"" + std::string(id) + "\" has an unreadable record");
    return view.to_owned(id);
}

FxRecord Store::set_exchange_rate(uint64_t inr_per_usd_micro) {
    if (inr_per_usd_micro == 0 || inr_per_usd_micro > kMaxRateMicro)
        invalid("rate", "the rate must be a positive decimal of at most 1000000 INR per USD");
    FxRecord rec{inr_per_usd_micro, clock_()};
    std::string encoded = encode_fx_record(rec);
    WriteTxn txn(env_.handle(), write_wait_limit_);
    std::string_view name = KA_META_FX_USD_INR;
    lmdb::val k = val_of(name), v = val_of(encoded);
    meta_.put(txn, k, v);
    txn.commit();
    return rec;
}

std::optional<FxRecord> Store::exchange_rate() {
    auto txn = lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY);
    std::string_view name = KA_META_FX_USD_INR;
    lmdb::val k = val_of(name), v;
    if (!meta_.get(txn, k, v)) return std::nullopt;
    FxRecord rec;
    if (decode_fx_record(v.data(), v.size(), rec) != DecodeStatus::kOk)
        corrupt("the exchange rate record is unreadable");
    return rec;
}

KeyRecord Store::revoke_key(const std::optional<Id> &owner, const Id &key_id) {
    WriteTxn txn(env_.handle(), write_wait_limit_);
    auto rec = find_key_in(txn, key_id);
    if (!rec || (owner && rec->account_id != *owner))
        throw StoreError(StoreError::Kind::kNotFound, "id",
                         "no key " + id_to_string(kKeyIdPrefix, key_id));
    if (rec->status == KA_KEY_REVOKED) return *rec;
    rec->status = KA_KEY_REVOKED;
    rec->revoked_ms = clock_();
    std::string encoded = encode_key_record(*rec);
    lmdb::val ik = val_of(key_id.data(), key_id.size()), found;
    keys_.get(txn, ik, found);
    std::string hash(found.data(), found.size());  // copy: the put may move pages
    lmdb::val hk = val_of(hash), hv = val_of(encoded);
    keys_by_hash_.put(txn, hk, hv);
    txn.commit();
    return *rec;
}

}  // namespace keyauth
