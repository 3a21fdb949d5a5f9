// Keeps key_slots, the edge's hot table (lmdb_schema/SCHEMA.md), in step with
// keys_by_hash inside the writer's transaction: apply_records calls it for
// the hashes a batch touched, so keyauthd, keyauthctl and keyauth-syncd keep
// it alike and a commit holds both or neither. A slot is a pure function of
// the keys_by_hash records sharing its fingerprint, so updating a hash twice,
// or rebuilding, gives the same table.
#pragma once

#include <lmdb.h>

#include <string>
#include <vector>

namespace keyauth {

// Writes the whole table anew from keys_by_hash, sized for its keys (a
// capacity of 1.39 slots a key, at least 1,024).
void rebuild_key_slots(MDB_txn *txn, MDB_dbi keys_by_hash, MDB_dbi key_slots);

// Brings the slots of these hashes (any order, repeats allowed) in step with
// keys_by_hash as it now is; rebuilds instead when the table has no header,
// or would be over 88% or under 20% full.
void update_key_slots(MDB_txn *txn, MDB_dbi keys_by_hash, MDB_dbi key_slots,
                      std::vector<std::string> hashes);

// What disagrees between the table and keys_by_hash (empty: nothing), for
// `keyauthctl doctor` and the tests: a slot that is not what its keys make,
// a key the lookup does not find, a count or chunk that is off.
std::vector<std::string> check_key_slots(MDB_txn *txn, MDB_dbi keys_by_hash, MDB_dbi key_slots);

}  // namespace keyauth
