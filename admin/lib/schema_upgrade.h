// Moving a store written by an older build to schema 3 (lmdb_schema/SCHEMA.md,
// "Upgrading"), inside the writer's transaction that then writes
// schema_version 3: what the new layout holds is complete before anyone reads it.
#pragma once

#include <lmdb.h>

#include "lmdb_apply.h"

namespace keyauth {

// Moves every key of keys_by_hash (schema 1 and 2) into key_records, in key
// id order, and deletes keys_by_hash and keys. account_keys keeps its
// entries. key_slots is left to the caller's rebuild_key_slots. A store
// without keys_by_hash is left alone. Throws StoreError kCorrupt for a key
// record that does not decode, or two records of one key id.
void move_keys_to_schema_3(MDB_txn *txn, const LmdbTables &tables);

}  // namespace keyauth
