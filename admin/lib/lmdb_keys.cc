#include "lmdb_keys.h"

#include <lmdb++.h>

#include "key_slots.h"
#include "keyauth_schema.h"
#include "store_error.h"

namespace keyauth {
namespace {

MDB_val val(const void *p, size_t n) { return MDB_val{n, const_cast<void *>(p)}; }
std::string_view view(const MDB_val &v) { return {static_cast<const char *>(v.mv_data), v.mv_size}; }

}  // namespace

std::string key_records_value(std::string_view hash, std::string_view record) {
    std::string out;
    out.reserve(hash.size() + record.size());
    out.append(hash).append(record);
    return out;
}

std::optional<StoredKey> split_key_records_value(std::string_view value) noexcept {
    if (value.size() < KA_HASH_LEN) return std::nullopt;
    return StoredKey{value.substr(0, KA_HASH_LEN), value.substr(KA_HASH_LEN)};
}

std::optional<StoredKey> key_by_id(MDB_txn *txn, MDB_dbi key_records, std::string_view id) {
    MDB_val k = val(id.data(), id.size()), v;
    if (!lmdb::dbi_get(txn, key_records, &k, &v)) return std::nullopt;
    return split_key_records_value(view(v));
}

std::optional<std::string> slot_key_id_of(MDB_txn *txn, MDB_dbi key_slots, std::string_view hash) {
    if (hash.size() != KA_HASH_LEN) return std::nullopt;
    MDB_val hk = val(KA_KEY_SLOTS_HEADER_KEY, sizeof(KA_KEY_SLOTS_HEADER_KEY) - 1), hv;
    KeySlotsHeader h;
    if (!lmdb::dbi_get(txn, key_slots, &hk, &hv) ||
        decode_key_slots_header(hv.mv_data, hv.mv_size, h) != DecodeStatus::kOk ||
        h.version != KA_KEY_SLOTS_V2) {
        return std::nullopt;
    }
    auto get_chunk = [&](uint64_t n) -> const unsigned char * {
        unsigned char key[4];
        chunk_key(n, key);
        MDB_val k = val(key, sizeof key), v;
        if (!lmdb::dbi_get(txn, key_slots, &k, &v) || v.mv_size != h.chunk_bytes()) return nullptr;
        return static_cast<const unsigned char *>(v.mv_data);
    };
    const unsigned char *slot = nullptr;
    switch (find_key_slot(h, reinterpret_cast<const unsigned char *>(hash.data()), get_chunk, slot)) {
    case SlotFind::kInline:
    case SlotFind::kInRecord:
        return std::string(reinterpret_cast<const char *>(slot_key_id(slot)), KA_ID_LEN);
    case SlotFind::kNoChunk:
        throw StoreError(StoreError::Kind::kCorrupt, "", "key_slots has a missing or torn chunk");
    case SlotFind::kAbsent:
        break;
    }
    return std::nullopt;
}

std::optional<StoredKey> key_by_hash(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots,
                                     std::string_view hash) {
    std::optional<std::string> id = slot_key_id_of(txn, key_slots, hash);
    if (!id) return std::nullopt;
    std::optional<StoredKey> key = key_by_id(txn, key_records, *id);
    if (!key || key->hash != hash) return std::nullopt;
    return key;
}

}  // namespace keyauth
