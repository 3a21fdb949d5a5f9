// The one function that writes records into LMDB. It writes a primary record
// and keeps the derived tables (indexes) in step with it, so the single-host
// backend and keyauth-syncd (applying records that come from etcd, keyed
// "<db name>/<hex of the LMDB key>") can never disagree on what a record
// means for the indexes. Applying the same records again changes nothing.
#pragma once

#include <lmdb.h>

#include <array>
#include <vector>

#include "mutation.h"

namespace keyauth {

// The handles of the named databases, by Table, and of where schema 3 keeps
// keys (no Table: neither is a mutation's record, nor mirrored):
// key_records (key id -> hash ++ record) and key_slots, the hot table and
// the index by hash (lmdb_keys.h). The Tables keys_by_hash and keys are
// views of those two: their handles are kNoTable, which LMDB refuses.
struct LmdbTables {
    static constexpr MDB_dbi kNoTable = ~MDB_dbi{0};
    std::array<MDB_dbi, kTableCount> dbi{};
    MDB_dbi key_records = kNoTable;
    MDB_dbi key_slots = kNoTable;
    MDB_dbi operator[](Table table) const noexcept { return dbi[static_cast<size_t>(table)]; }
};

// Opens (creating) every named database of schema 3 inside a write transaction.
LmdbTables open_tables(MDB_txn *txn);

// Applies `changes` inside `txn`, with the effect of applying them in order
// (a write transaction the caller commits). A keys_by_hash record goes to
// key_records under its key id (in id order: new keys append, which fills
// LMDB's pages), account_keys and its slot; a put replaces whatever record
// its hash had, and a record whose id another hash's key holds is refused. Refuses, with StoreError and nothing further applied, a record
// of a derived table, a meta name that is not primary (mutation.h), or a key record whose
// layout it cannot read (its index entries could not be computed): the
// caller aborts the transaction. LMDB errors throw lmdb::error.
// key_slots is updated in the same transaction, unless `slots` is kDeferred:
// a store being filled that nobody reads yet (keyauth-syncd's rebuild) has
// its table built once, by rebuild_key_slots, before anyone reads it. Such a
// batch finds a hash's key through the slots as they are, so it can add keys
// and replace them by id, but its deletes find nothing the table lacks.
enum class KeySlots { kUpdate, kDeferred };
void apply_records(MDB_txn *txn, const LmdbTables &tables, const std::vector<RecordChange> &changes,
                   KeySlots slots = KeySlots::kUpdate);

}  // namespace keyauth
