#include "lmdb_apply.h"

#include <lmdb++.h>

#include <string>
#include <string_view>

#include "key_index.h"
#include "records.h"
#include "store_error.h"

namespace keyauth {
namespace {

MDB_val val(std::string_view s) { return MDB_val{s.size(), const_cast<char *>(s.data())}; }
std::string_view view(const MDB_val &v) { return {static_cast<const char *>(v.mv_data), v.mv_size}; }

[[noreturn]] void refuse(const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, "", msg);
}

// Deletes an index entry only while it still points at `hash`: another key
// may own it now (it never should, but an index must not lose a live key).
void drop_entry(MDB_txn *txn, MDB_dbi dbi, std::string_view key, std::string_view hash) {
    MDB_val k = val(key), found;
    if (lmdb::dbi_get(txn, dbi, &k, &found) && view(found) == hash) lmdb::dbi_del(txn, dbi, &k);
}

void put(MDB_txn *txn, MDB_dbi dbi, std::string_view key, std::string_view value) {
    MDB_val k = val(key), v = val(value);
    lmdb::dbi_put(txn, dbi, &k, &v, 0);
}

// keys_by_hash: the record, and its entries in keys and account_keys. The
// old record's entries go first, so a record whose ids changed leaves none
// behind; the same record applied twice ends where it started.
void apply_key_record(MDB_txn *txn, const LmdbTables &t, const RecordChange &c) {
    if (c.key.size() != KA_HASH_LEN) refuse("keys_by_hash key of " + std::to_string(c.key.size()) + " bytes");
    std::optional<KeyIndex> next;
    if (c.value) next = key_index_of(*c.value);  // refused before anything is touched
    MDB_val k = val(c.key), old;
    if (lmdb::dbi_get(txn, t[Table::kKeysByHash], &k, &old)) {
        KeyIndex was = key_index_of(view(old));
        drop_entry(txn, t[Table::kKeys], was.by_id, c.key);
        drop_entry(txn, t[Table::kAccountKeys], was.by_account, c.key);
    }
    if (!next) {
        lmdb::dbi_del(txn, t[Table::kKeysByHash], &k);
        return;
    }
    put(txn, t[Table::kKeysByHash], c.key, *c.value);
    put(txn, t[Table::kKeys], next->by_id, c.key);
    put(txn, t[Table::kAccountKeys], next->by_account, c.key);
}

}  // namespace

LmdbTables open_tables(MDB_txn *txn) {
    LmdbTables t;
    for (size_t i = 0; i < kTableCount; i++) {
        lmdb::dbi_open(txn, table_name(static_cast<Table>(i)), MDB_CREATE, &t.dbi[i]);
    }
    return t;
}

void apply_records(MDB_txn *txn, const LmdbTables &tables, const std::vector<RecordChange> &changes) {
    for (const RecordChange &c : changes) {
        if (!is_primary(c.table))
            refuse(std::string(table_name(c.table)) + " is derived: its records are not applied");
        if (c.table == Table::kMeta && !is_mirrored_meta(c.key))
            refuse("meta \"" + c.key + "\" belongs to this environment: it is not applied");
        if (c.table == Table::kKeysByHash) {
            apply_key_record(txn, tables, c);
        } else if (c.value) {
            put(txn, tables[c.table], c.key, *c.value);
        } else {
            MDB_val k = val(c.key);
            lmdb::dbi_del(txn, tables[c.table], &k);
        }
    }
}

}  // namespace keyauth
