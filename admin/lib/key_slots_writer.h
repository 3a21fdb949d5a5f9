// Keeps key_slots, the edge's hot table and the store's one index by hash
// (lmdb_schema/SCHEMA.md), in step with key_records inside the writer's
// transaction: apply_records calls it for the hashes a batch touched, so
// keyauthd, keyauthctl and keyauth-syncd keep it alike and a commit holds
// both or neither. A slot is a pure function of the one key record whose
// hash starts with its fingerprint (two keys never share one: the second is
// refused), so updating a hash twice, or rebuilding, gives the same slots.
#pragma once

#include <lmdb.h>

#include <optional>
#include <string>
#include <vector>

namespace keyauth {

// Writes the whole table anew from key_records, sized for its keys (a
// capacity of 1.39 slots a key, at least 1,024). Throws StoreError kInvalid
// when two keys share a fingerprint.
void rebuild_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots);

// A hash whose key changed, and the id its key now has (none: it has no key).
struct SlotChange {
    std::string hash;
    std::optional<std::string> key_id;
};

// Brings the slots of these hashes (any order; for a hash given twice, the
// last wins) in step with key_records as it now is; rebuilds instead when the
// table has no header of this layout, or would be over 88% or under 20% full.
// Throws StoreError kInvalid for a key whose fingerprint another key holds.
void update_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots,
                      std::vector<SlotChange> changes);

// What disagrees between the table and key_records (empty: nothing), for
// `keyauthctl doctor` and the tests: a slot that is not what its key makes,
// a key the lookup does not find, a count or chunk that is off.
std::vector<std::string> check_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots);

}  // namespace keyauth
