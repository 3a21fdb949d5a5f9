// Helpers of the keyauth-syncd tests: schema v1 records to write, and the
// whole content of an LMDB environment, table by table, to compare.
#pragma once

#include <lmdb.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "keyauth_schema.h"
#include "le.h"
#include "lmdb_apply.h"
#include "lmdb_backend.h"
#include "mutation.h"
#include "key_slots_writer.h"
#include "records.h"

namespace keyauth::testing {

// table name → (key → value), every named database of the environment.
using Dump = std::map<std::string, std::map<std::string, std::string>>;

// The Store's tables as the store keeps them: keys_by_hash (hash -> record)
// and keys (id -> hash) read out of key_records (schema 3).
inline Dump dump_txn(MDB_txn *txn) {
    Dump out;
    auto each = [&](const char *name, auto &&fn) {
        MDB_dbi dbi;
        if (mdb_dbi_open(txn, name, 0, &dbi) != 0) return false;
        MDB_cursor *cur = nullptr;
        if (mdb_cursor_open(txn, dbi, &cur) != 0) throw std::runtime_error("mdb_cursor_open");
        MDB_val k, v;
        for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
            fn(std::string(static_cast<const char *>(k.mv_data), k.mv_size),
               std::string(static_cast<const char *>(v.mv_data), v.mv_size));
        }
        mdb_cursor_close(cur);
        return true;
    };
    for (size_t i = 0; i < kTableCount; ++i) {
        const char *name = table_name(static_cast<Table>(i));
        auto &table = out[name];
        each(name, [&](std::string k, std::string v) { table[std::move(k)] = std::move(v); });
    }
    out[KA_DB_KEYS_BY_HASH];
    out[KA_DB_KEYS];
    each(KA_DB_KEY_RECORDS, [&](std::string id, std::string value) {
        if (value.size() < KA_HASH_LEN) throw std::runtime_error("a key_records value without its hash");
        const std::string hash = value.substr(0, KA_HASH_LEN);
        out[KA_DB_KEYS_BY_HASH][hash] = value.substr(KA_HASH_LEN);
        out[KA_DB_KEYS][id] = hash;
    });
    // key_slots is not compared (where a slot sits depends on the order keys
    // came in) but must agree with key_records in every store dumped.
    MDB_dbi records, slots;
    if (mdb_dbi_open(txn, KA_DB_KEY_RECORDS, 0, &records) == 0 &&
        mdb_dbi_open(txn, KA_DB_KEY_SLOTS, 0, &slots) == 0) {
        for (const std::string &problem : check_key_slots(txn, records, slots)) {
            throw std::runtime_error(problem);
        }
    }
    return out;
}

inline Dump dump_env(MDB_env *env) {
    MDB_txn *txn = nullptr;
    if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) != 0) throw std::runtime_error("mdb_txn_begin");
    Dump d = dump_txn(txn);
    mdb_txn_abort(txn);
    return d;
}

// The records, without the mirror's own mark (which a reference store lacks).
inline Dump without_mark(Dump d) {
    d[KA_DB_META].erase(KA_META_SYNCD_REVISION);
    d[KA_DB_META].erase(KA_META_CLUSTER_ID);
    return d;
}

// What a store holds after apply_records(changes) on a new environment: the
// reference a mirror must equal, derived tables included.
inline Dump applied(const std::vector<RecordChange> &changes, const std::string &dir) {
    LmdbBackend store(dir);
    MDB_txn *txn = nullptr;
    if (mdb_txn_begin(store.env(), nullptr, 0, &txn) != 0) throw std::runtime_error("mdb_txn_begin");
    apply_records(txn, store.tables(), changes);
    if (mdb_txn_commit(txn) != 0) throw std::runtime_error("mdb_txn_commit");
    return dump_env(store.env());
}

// A read-only environment, as an nginx worker opens one.
class Reader {
public:
    explicit Reader(const std::string &path) {
        mdb_env_create(&env_);
        mdb_env_set_maxdbs(env_, KA_DB_COUNT);
        rc_ = mdb_env_open(env_, path.c_str(), MDB_RDONLY | MDB_NOTLS, 0);
    }
    ~Reader() {
        if (txn_ != nullptr) mdb_txn_abort(txn_);
        mdb_env_close(env_);
    }
    bool ok() const { return rc_ == 0; }
    // Keeps a snapshot open until the Reader goes.
    void hold() { mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn_); }
    Dump held() { return dump_txn(txn_); }
    Dump now() { return dump_env(env_); }

private:
    MDB_env *env_ = nullptr;
    MDB_txn *txn_ = nullptr;
    int rc_ = -1;
};

inline Id test_id(unsigned n) {
    Id id{};
    id[4] = static_cast<unsigned char>(n >> 8);
    id[5] = static_cast<unsigned char>(n);
    id[11] = static_cast<unsigned char>(n);
    return id;
}
inline std::string id_bytes(const Id &id) { return std::string(id.begin(), id.end()); }
inline std::string test_hash(unsigned n) {
    std::string h(KA_HASH_LEN, '\0');
    h[0] = static_cast<char>(n >> 8);
    h[1] = static_cast<char>(n);
    h[31] = 'h';
    return h;
}

inline std::string key_record(unsigned key, unsigned account, bool revoked = false,
                              const std::string &name = "a key") {
    KeyRecord r;
    r.status = revoked ? KA_KEY_REVOKED : KA_KEY_ACTIVE;
    r.requested_rpm = 100;
    r.key_id = test_id(key);
    r.account_id = test_id(account);
    r.created_ms = 1'760'000'000'000;
    r.revoked_ms = revoked ? 1'760'000'100'000 : 0;
    r.scopes = {"ip:read"};
    r.prefix = "ka_abcdefghi";
    r.name = name;
    return encode_key_record(r);
}

inline std::string account_record(const std::string &name, uint32_t rpm = 600) {
    AccountRecord r;
    r.entitlement_rpm = rpm;
    r.created_ms = 1'760'000'000'000;
    r.name = name;
    return encode_account_record(r);
}

inline std::string plan_record(const std::string &id, uint64_t paise) {
    PlanRecord r;
    r.id = id;
    r.name = "Plan " + id;
    r.price_paise = paise;
    r.features = {"feature"};
    r.sort_order = 1;
    return encode_plan_record(r);
}

inline std::string u64_le(uint64_t v) {
    unsigned char b[8];
    store_le<uint64_t>(b, v);
    return std::string(reinterpret_cast<char *>(b), 8);
}

// A key record of a layout version this build cannot read.
inline std::string unknown_layout_key_record() {
    std::string r = key_record(999, 1);
    r[0] = 99;
    r[1] = 0;
    return r;
}

inline ino_t inode_of(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}
inline mode_t mode_of(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

template <typename Condition>
bool wait_until(Condition done, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

}  // namespace keyauth::testing
