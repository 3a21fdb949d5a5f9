// Where a key lives in LMDB, schema 3 (lmdb_schema/SCHEMA.md): key_records
// maps a key id to SHA-256(secret) ++ the key record, so that keys made in
// creation order append to it, and key_slots is the one index by hash. The
// Store's tables keys_by_hash (hash -> record) and keys (id -> hash) are
// views of these two (lmdb_backend.cc); apply_records writes them.
#pragma once

#include <lmdb.h>

#include <optional>
#include <string>
#include <string_view>

namespace keyauth {

struct StoredKey {
    std::string_view hash;    // KA_HASH_LEN bytes
    std::string_view record;  // the key record
};

// The key_records value of a key, and its two parts (nullopt: too short).
std::string key_records_value(std::string_view hash, std::string_view record);
std::optional<StoredKey> split_key_records_value(std::string_view value) noexcept;

// The key stored under this id. What it views lives as long as the
// transaction does not write again.
std::optional<StoredKey> key_by_id(MDB_txn *txn, MDB_dbi key_records, std::string_view id);

// The id key_slots gives for this hash (the key of its fingerprint), if any;
// the whole hash is not compared here.
std::optional<std::string> slot_key_id_of(MDB_txn *txn, MDB_dbi key_slots, std::string_view hash);

// The key of this whole hash: its slot's id, then that record's hash compared.
std::optional<StoredKey> key_by_hash(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots,
                                     std::string_view hash);

}  // namespace keyauth
