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

// The handles of the named databases, by Table, and of key_slots, the hot
// table derived from keys_by_hash (no Table: it is never a mutation's record,
// nor mirrored).
struct LmdbTables {
    std::array<MDB_dbi, kTableCount> dbi{};
    MDB_dbi key_slots = 0;
    MDB_dbi operator[](Table table) const noexcept { return dbi[static_cast<size_t>(table)]; }
};

// Opens (creating) every named database inside a write transaction.
LmdbTables open_tables(MDB_txn *txn);

// Applies `changes` inside `txn`, with the effect of applying them in order
// (key records go in hash order and index entries in key order, which fills
// LMDB's pages densely when a batch is large) (a write transaction the caller
// commits). Refuses, with StoreError and nothing further applied, a record
// of a derived table, a meta name that is not mirrored, or a key record whose
// layout it cannot read (its index entries could not be computed): the
// caller aborts the transaction. LMDB errors throw lmdb::error.
// key_slots is updated in the same transaction, unless `slots` is kDeferred:
// a store being filled that nobody reads yet (keyauth-syncd's rebuild) has
// its table built once, by rebuild_key_slots, before anyone reads it.
enum class KeySlots { kUpdate, kDeferred };
void apply_records(MDB_txn *txn, const LmdbTables &tables, const std::vector<RecordChange> &changes,
                   KeySlots slots = KeySlots::kUpdate);

}  // namespace keyauth
