// What a store is laid out as, read straight from LMDB for the upgrade
// tests: its schema version, the entries of each named database, and what
// check_key_slots finds wrong.
#pragma once

#include <gtest/gtest.h>
#include <lmdb.h>

#include <map>
#include <string>
#include <vector>

#include "key_slots_writer.h"
#include "keyauth_schema.h"
#include "le.h"

namespace keyauth::testing {

struct StoreLayout {
    uint32_t schema = 0;
    std::map<std::string, size_t> databases;  // name -> entries
    std::vector<std::string> slot_problems;
};

inline StoreLayout layout_of(const std::string &path) {
    StoreLayout out;
    MDB_env *env = nullptr;
    mdb_env_create(&env);
    mdb_env_set_maxdbs(env, KA_DB_COUNT);
    if (mdb_env_open(env, path.c_str(), MDB_RDONLY, 0) != 0) {
        mdb_env_close(env);
        return out;
    }
    MDB_txn *txn = nullptr;
    mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
    MDB_dbi main;
    mdb_dbi_open(txn, nullptr, 0, &main);
    MDB_cursor *cur = nullptr;
    mdb_cursor_open(txn, main, &cur);
    MDB_val k, v;
    std::vector<std::string> names;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
        names.emplace_back(static_cast<const char *>(k.mv_data), k.mv_size);
    mdb_cursor_close(cur);
    for (const std::string &name : names) {
        MDB_dbi dbi;
        MDB_stat st;
        if (mdb_dbi_open(txn, name.c_str(), 0, &dbi) == 0 && mdb_stat(txn, dbi, &st) == 0)
            out.databases[name] = st.ms_entries;
    }
    MDB_dbi meta, records, slots;
    MDB_val sk{sizeof(KA_META_SCHEMA_VERSION) - 1, const_cast<char *>(KA_META_SCHEMA_VERSION)}, sv;
    if (mdb_dbi_open(txn, KA_DB_META, 0, &meta) == 0 && mdb_get(txn, meta, &sk, &sv) == 0 && sv.mv_size == 4)
        out.schema = load_le<uint32_t>(static_cast<const unsigned char *>(sv.mv_data));
    if (mdb_dbi_open(txn, KA_DB_KEY_RECORDS, 0, &records) == 0 && mdb_dbi_open(txn, KA_DB_KEY_SLOTS, 0, &slots) == 0)
        out.slot_problems = check_key_slots(txn, records, slots);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return out;
}

// Puts `value` under `key` in database `db` and commits, behind the writers'
// back, as a writer of another build (or a hand) would: in an environment
// open here, or in the store at `path`.
inline void put_behind_writers(MDB_env *env, const char *db, const std::string &key, const std::string &value) {
    MDB_txn *txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    MDB_dbi dbi;
    ASSERT_EQ(mdb_dbi_open(txn, db, 0, &dbi), 0);
    MDB_val k{key.size(), const_cast<char *>(key.data())}, v{value.size(), const_cast<char *>(value.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
}

inline void put_behind_writers(const std::string &path, const char *db, const std::string &key,
                               const std::string &value) {
    MDB_env *env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, KA_DB_COUNT);
    ASSERT_EQ(mdb_env_open(env, path.c_str(), 0, 0600), 0);
    put_behind_writers(env, db, key, value);
    mdb_env_close(env);
}

// The schema_version a writer of some future build would commit first.
inline const std::string kSchemaNine("\x09\0\0\0", 4);

// A store moved to schema 3 holding `keys` keys: no table of schema 2 left,
// every key in key_records and account_keys, every slot as its key says.
inline void expect_schema_three(const std::string &path, size_t keys) {
    const StoreLayout layout = layout_of(path);
    EXPECT_EQ(layout.schema, 3u);
    EXPECT_EQ(layout.databases.count(KA_DB_KEYS_BY_HASH), 0u);
    EXPECT_EQ(layout.databases.count(KA_DB_KEYS), 0u);
    EXPECT_EQ(layout.databases.count(KA_DB_KEY_RECORDS) ? layout.databases.at(KA_DB_KEY_RECORDS) : 0, keys);
    EXPECT_EQ(layout.databases.count(KA_DB_ACCOUNT_KEYS) ? layout.databases.at(KA_DB_ACCOUNT_KEYS) : 0, keys);
    EXPECT_EQ(layout.slot_problems, std::vector<std::string>{});
}

}  // namespace keyauth::testing
