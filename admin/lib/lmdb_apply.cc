#include "lmdb_apply.h"

#include <lmdb++.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "key_index.h"
#include "key_slots_writer.h"
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

// An index entry to write, or to drop while it still points at `hash`.
struct IndexOp {
    MDB_dbi dbi;
    std::string key;
    std::string_view hash;
    bool drop;
};

// keys_by_hash: the record; its entries in keys and account_keys go to ops.
// The old record's entries are dropped first, so a record whose ids changed
// leaves none behind; the same record applied twice ends where it started.
void apply_key_record(MDB_txn *txn, const LmdbTables &t, const RecordChange &c, std::vector<IndexOp> &ops) {
    if (c.key.size() != KA_HASH_LEN) refuse("keys_by_hash key of " + std::to_string(c.key.size()) + " bytes");
    std::optional<KeyIndex> next;
    if (c.value) next = key_index_of(*c.value);  // refused before anything is touched
    MDB_val k = val(c.key), old;
    if (lmdb::dbi_get(txn, t[Table::kKeysByHash], &k, &old)) {
        KeyIndex was = key_index_of(view(old));
        ops.push_back({t[Table::kKeys], std::move(was.by_id), c.key, true});
        ops.push_back({t[Table::kAccountKeys], std::move(was.by_account), c.key, true});
    }
    if (!next) {
        lmdb::dbi_del(txn, t[Table::kKeysByHash], &k);
        return;
    }
    put(txn, t[Table::kKeysByHash], c.key, *c.value);
    ops.push_back({t[Table::kKeys], std::move(next->by_id), c.key, false});
    ops.push_back({t[Table::kAccountKeys], std::move(next->by_account), c.key, false});
}

// Key records in hash order, then their index entries in key order (each
// LMDB key's changes keep their order, and different keys commute): a batch
// of new keys then appends to pages rather than splitting them at random.
void apply_key_records(MDB_txn *txn, const LmdbTables &t, std::vector<const RecordChange *> &changes,
                       KeySlots slots) {
    if (changes.empty()) return;
    std::stable_sort(changes.begin(), changes.end(),
                     [](const RecordChange *a, const RecordChange *b) { return a->key < b->key; });
    std::vector<IndexOp> ops;
    ops.reserve(changes.size() * 2);
    std::vector<std::string> hashes;
    hashes.reserve(changes.size());
    for (const RecordChange *c : changes) {
        apply_key_record(txn, t, *c, ops);
        hashes.push_back(c->key);
    }
    std::stable_sort(ops.begin(), ops.end(), [](const IndexOp &a, const IndexOp &b) {
        return a.dbi != b.dbi ? a.dbi < b.dbi : a.key < b.key;
    });
    for (const IndexOp &op : ops) {
        if (op.drop) drop_entry(txn, op.dbi, op.key, op.hash);
        else put(txn, op.dbi, op.key, op.hash);
    }
    if (slots == KeySlots::kUpdate) update_key_slots(txn, t[Table::kKeysByHash], t.key_slots, std::move(hashes));
}

}  // namespace

LmdbTables open_tables(MDB_txn *txn) {
    LmdbTables t;
    for (size_t i = 0; i < kTableCount; i++) {
        lmdb::dbi_open(txn, table_name(static_cast<Table>(i)), MDB_CREATE, &t.dbi[i]);
    }
    lmdb::dbi_open(txn, KA_DB_KEY_SLOTS, MDB_CREATE, &t.key_slots);
    return t;
}

void apply_records(MDB_txn *txn, const LmdbTables &tables, const std::vector<RecordChange> &changes,
                   KeySlots slots) {
    std::vector<const RecordChange *> key_changes;
    for (const RecordChange &c : changes) {
        if (!is_primary(c.table))
            refuse(std::string(table_name(c.table)) + " is derived: its records are not applied");
        if (c.table == Table::kMeta && !is_mirrored_meta(c.key))
            refuse("meta \"" + c.key + "\" belongs to this environment: it is not applied");
        if (c.table == Table::kKeysByHash) {
            key_changes.push_back(&c);
        } else if (c.value) {
            put(txn, tables[c.table], c.key, *c.value);
        } else {
            MDB_val k = val(c.key);
            lmdb::dbi_del(txn, tables[c.table], &k);
        }
    }
    apply_key_records(txn, tables, key_changes, slots);
}

}  // namespace keyauth
