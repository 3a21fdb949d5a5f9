#include "schema_upgrade.h"

#include <lmdb++.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "keyauth_schema.h"
#include "lmdb_keys.h"
#include "records.h"
#include "store_error.h"

namespace keyauth {
namespace {

[[noreturn]] void corrupt(const std::string &why) {
    throw StoreError(StoreError::Kind::kCorrupt, "", "cannot move the keys to schema 3: " + why +
                                                         " (keyauthctl doctor tells more)");
}

// Opens a database of the old layout; false if the store has none.
bool open_old(MDB_txn *txn, const char *name, MDB_dbi &dbi) {
    const int rc = mdb_dbi_open(txn, name, 0, &dbi);
    if (rc == MDB_NOTFOUND) return false;
    if (rc != 0) lmdb::error::raise("mdb_dbi_open", rc);
    return true;
}

void drop(MDB_txn *txn, MDB_dbi dbi) {
    const int rc = mdb_drop(txn, dbi, 1);
    if (rc != 0) lmdb::error::raise("mdb_drop", rc);
}

// A key's id and hash: 44 bytes a key in memory while the keys move.
struct Entry {
    char id[KA_ID_LEN];
    char hash[KA_HASH_LEN];
};

}  // namespace

void move_keys_to_schema_3(MDB_txn *txn, const LmdbTables &t) {
    MDB_dbi by_hash;
    if (!open_old(txn, KA_DB_KEYS_BY_HASH, by_hash)) return;
    std::vector<Entry> keys;
    {
        MDB_cursor *cur = nullptr;
        if (int rc = mdb_cursor_open(txn, by_hash, &cur); rc != 0) lmdb::error::raise("mdb_cursor_open", rc);
        MDB_val k, v;
        try {
            for (bool ok = lmdb::cursor_get(cur, &k, &v, MDB_FIRST); ok; ok = lmdb::cursor_get(cur, &k, &v, MDB_NEXT)) {
                KeyRecordView view;
                if (k.mv_size != KA_HASH_LEN || decode_key_record(v.mv_data, v.mv_size, view) != DecodeStatus::kOk)
                    corrupt("a key record of keys_by_hash does not decode");
                Entry e;
                std::memcpy(e.id, view.key_id, KA_ID_LEN);
                std::memcpy(e.hash, k.mv_data, KA_HASH_LEN);
                keys.push_back(e);
            }
        } catch (...) {
            mdb_cursor_close(cur);
            throw;
        }
        mdb_cursor_close(cur);
    }
    std::sort(keys.begin(), keys.end(),
              [](const Entry &a, const Entry &b) { return std::memcmp(a.id, b.id, KA_ID_LEN) < 0; });
    for (size_t i = 0; i < keys.size(); i++) {
        if (i > 0 && std::memcmp(keys[i - 1].id, keys[i].id, KA_ID_LEN) == 0) corrupt("two key records name one key id");
        MDB_val hk{KA_HASH_LEN, keys[i].hash}, record;
        if (!lmdb::dbi_get(txn, by_hash, &hk, &record)) corrupt("a key record went missing");
        const std::string value = key_records_value(
            std::string_view(keys[i].hash, KA_HASH_LEN),
            std::string_view(static_cast<const char *>(record.mv_data), record.mv_size));
        MDB_val k{KA_ID_LEN, keys[i].id}, v{value.size(), const_cast<char *>(value.data())};
        // in id order into a table the store had no reason to hold yet
        lmdb::dbi_put(txn, t.key_records, &k, &v, MDB_APPEND);
    }
    drop(txn, by_hash);
    MDB_dbi by_id;
    if (open_old(txn, KA_DB_KEYS, by_id)) drop(txn, by_id);
}

}  // namespace keyauth
