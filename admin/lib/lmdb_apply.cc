#include "lmdb_apply.h"

#include <lmdb++.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "key_index.h"
#include "key_slots_writer.h"
#include "lmdb_keys.h"
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

// The id of the key stored under this hash, found through its slot.
std::optional<std::string> stored_id_of(MDB_txn *txn, const LmdbTables &t, std::string_view hash) {
    std::optional<std::string> id = slot_key_id_of(txn, t.key_slots, hash);
    if (!id) return std::nullopt;
    std::optional<StoredKey> key = key_by_id(txn, t.key_records, *id);
    if (!key || key->hash != hash) return std::nullopt;
    return id;
}

// Deletes key `id` (stored under `hash`) and its account_keys entry.
void remove_key(MDB_txn *txn, const LmdbTables &t, const std::string &id, std::string_view hash) {
    std::optional<StoredKey> old = key_by_id(txn, t.key_records, id);
    if (!old || old->hash != hash) return;
    KeyRecordView v;
    if (decode_key_record(old->record.data(), old->record.size(), v) == DecodeStatus::kOk) {
        std::string by_account(reinterpret_cast<const char *>(v.account_id), KA_ID_LEN);
        drop_entry(txn, t[Table::kAccountKeys], by_account + id, hash);
    }
    MDB_val k = val(id);
    lmdb::dbi_del(txn, t.key_records, &k);
}

// One key change, the last of its hash in the batch: the record (with its
// index entries, refused before anything is written if it does not decode)
// or a delete.
struct KeyChange {
    const RecordChange *change;
    std::optional<KeyIndex> index;
};

void apply_key_change(MDB_txn *txn, const LmdbTables &t, const KeyChange &kc) {
    const std::string &hash = kc.change->key;
    if (!kc.index) {
        if (std::optional<std::string> id = stored_id_of(txn, t, hash)) remove_key(txn, t, *id, hash);
        return;
    }
    const KeyIndex &next = *kc.index;
    // a hash keeps its id for life; a record that says otherwise replaces it
    if (std::optional<std::string> was = stored_id_of(txn, t, hash); was && *was != next.by_id)
        remove_key(txn, t, *was, hash);
    if (std::optional<StoredKey> old = key_by_id(txn, t.key_records, next.by_id)) {
        if (old->hash != hash) refuse("a key record names a key id that another key holds");
        KeyRecordView v;
        if (decode_key_record(old->record.data(), old->record.size(), v) == DecodeStatus::kOk &&
            std::memcmp(v.account_id, next.by_account.data(), KA_ID_LEN) != 0) {
            std::string by_account(reinterpret_cast<const char *>(v.account_id), KA_ID_LEN);
            drop_entry(txn, t[Table::kAccountKeys], by_account + next.by_id, hash);
        }
    }
    put(txn, t.key_records, next.by_id, key_records_value(hash, *kc.change->value));
    put(txn, t[Table::kAccountKeys], next.by_account, hash);
}

// The last change of each hash (applying the earlier ones first ends the
// same way: a put replaces what its hash had), deletes first, then puts in
// key id order, so a batch of new keys appends to key_records.
void apply_key_records(MDB_txn *txn, const LmdbTables &t, const std::vector<const RecordChange *> &changes,
                       KeySlots slots) {
    if (changes.empty()) return;
    std::map<std::string_view, const RecordChange *> last;
    for (const RecordChange *c : changes) {
        if (c->key.size() != KA_HASH_LEN) refuse("keys_by_hash key of " + std::to_string(c->key.size()) + " bytes");
        last[c->key] = c;
    }
    std::vector<KeyChange> ordered;
    ordered.reserve(last.size());
    for (const auto &[hash, c] : last) {
        KeyChange kc{c, std::nullopt};
        if (c->value) kc.index = key_index_of(*c->value);
        ordered.push_back(std::move(kc));
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const KeyChange &a, const KeyChange &b) {
        if (a.index.has_value() != b.index.has_value()) return !a.index.has_value();
        return a.index && a.index->by_id < b.index->by_id;
    });
    std::vector<SlotChange> slot_changes;
    slot_changes.reserve(ordered.size());
    for (const KeyChange &kc : ordered) {
        apply_key_change(txn, t, kc);
        slot_changes.push_back({kc.change->key, kc.index ? std::optional<std::string>(kc.index->by_id) : std::nullopt});
    }
    if (slots == KeySlots::kUpdate) update_key_slots(txn, t.key_records, t.key_slots, std::move(slot_changes));
}

}  // namespace

LmdbTables open_tables(MDB_txn *txn) {
    LmdbTables t;
    for (size_t i = 0; i < kTableCount; i++) {
        const auto table = static_cast<Table>(i);
        if (table == Table::kKeysByHash || table == Table::kKeys) t.dbi[i] = LmdbTables::kNoTable;
        else lmdb::dbi_open(txn, table_name(table), MDB_CREATE, &t.dbi[i]);
    }
    lmdb::dbi_open(txn, KA_DB_KEY_RECORDS, MDB_CREATE, &t.key_records);
    lmdb::dbi_open(txn, KA_DB_KEY_SLOTS, MDB_CREATE, &t.key_slots);
    return t;
}

void apply_records(MDB_txn *txn, const LmdbTables &tables, const std::vector<RecordChange> &changes,
                   KeySlots slots) {
    std::vector<const RecordChange *> key_changes;
    for (const RecordChange &c : changes) {
        if (!is_primary(c.table))
            refuse(std::string(table_name(c.table)) + " is derived: its records are not applied");
        if (c.table == Table::kMeta && !is_primary_meta(c.key))
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
