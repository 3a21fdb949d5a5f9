// The hot table's layout (lmdb_schema/keyauth_schema.h, "key_slots"): its
// header, one slot's codec, where a hash's probe starts, and the lookup the
// edge runs. Shared by the edge, which reads it, and the writers, which keep
// it in step with the key records (admin/lib/key_slots_writer.h). Nothing here
// allocates or touches LMDB: chunks come through a callback, so the lookup
// runs over LMDB's map at the edge and over plain memory in tests and fuzzers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "keyauth_schema.h"
#include "records.h"

namespace keyauth {

struct KeySlotsHeader {
    uint16_t version = KA_KEY_SLOTS_V2;
    uint32_t chunk_slots = 0;
    uint64_t capacity = 0;
    uint64_t slots = 0;
    uint64_t count = 0;
    uint32_t max_probe = 1;

    uint64_t chunks() const noexcept { return chunk_slots == 0 ? 0 : slots / chunk_slots; }
    size_t chunk_bytes() const noexcept { return size_t{chunk_slots} * KA_KEY_SLOT_SIZE; }
};

// Slots a chunk: 1,023 slots and LMDB's 16-byte overflow header fill 16
// pages exactly, so that one key's write copies 64 KiB.
inline constexpr uint32_t kChunkSlots = 1023;

std::string encode_key_slots_header(const KeySlotsHeader &h);
// kUnknownVersion (h.version says which) or kCorrupt for a header that breaks
// a bound the lookup relies on; kOk otherwise.
DecodeStatus decode_key_slots_header(const void *data, size_t len, KeySlotsHeader &h) noexcept;

// The chunk key of chunk n: u32 big-endian.
void chunk_key(uint64_t n, unsigned char out[4]) noexcept;

// The home slot of a hash: its first 8 bytes, big-endian, scaled to capacity.
// Monotone in the hash's byte order, so hash order is home order.
uint64_t home_slot(const unsigned char *hash, uint64_t capacity) noexcept;

// One slot, encoded from a key's whole hash and record view: INLINE if its
// fields fit, else IN_RECORD (scopes over the slot's room, a rolled key, an
// expiry past u48 ms). out has KA_KEY_SLOT_SIZE bytes.
void encode_key_slot(const unsigned char *hash, const KeyRecordView &key, unsigned char *out) noexcept;
// A slot that sends the edge to the key's record: by key_id in key_records
// (a v2 table), or by the whole hash in keys_by_hash (v1, key_id null: a
// fingerprint shared by several keys).
void encode_in_record_slot(const unsigned char *hash, const unsigned char *key_id, unsigned char *out) noexcept;

inline uint8_t slot_state(const unsigned char *slot) noexcept { return slot[0]; }
inline const unsigned char *slot_fingerprint(const unsigned char *slot) noexcept { return slot + 8; }
// The key a slot of a v2 table holds (INLINE or IN_RECORD): its key_records key.
inline const unsigned char *slot_key_id(const unsigned char *slot) noexcept { return slot + 24; }

// An INLINE slot as the record view the edge uses: ids, status, rate, expiry
// and scopes point into the slot; created, revoked, name and prefix are not
// in a slot and stay empty. kCorrupt for a slot that breaks a bound.
DecodeStatus decode_key_slot(const unsigned char *slot, KeyRecordView &out) noexcept;

enum class SlotFind {
    kAbsent,     // no key has this hash
    kInline,     // the slot holds the key (decode_key_slot it)
    kInRecord,   // read the record: by slot_key_id (v2), by the whole hash (v1)
    kNoChunk,    // a chunk the header promises is missing or of the wrong size
};

// Looks hash up in the table: get_chunk(n) returns chunk n's bytes (size
// header.chunk_bytes()) or null. At most header.max_probe slots are read.
template <typename GetChunk>
SlotFind find_key_slot(const KeySlotsHeader &header, const unsigned char *hash,
                       GetChunk &&get_chunk, const unsigned char *&slot) noexcept {
    uint64_t i = home_slot(hash, header.capacity);
    const uint64_t end = i + header.max_probe < header.slots ? i + header.max_probe : header.slots;
    const unsigned char *chunk = nullptr;
    uint64_t chunk_no = ~uint64_t{0};
    for (; i < end; i++) {
        const uint64_t n = i / header.chunk_slots;
        if (n != chunk_no) {
            chunk = get_chunk(n);
            if (chunk == nullptr) return SlotFind::kNoChunk;
            chunk_no = n;
        }
        const unsigned char *s = chunk + (i % header.chunk_slots) * KA_KEY_SLOT_SIZE;
        if (slot_state(s) == KA_SLOT_EMPTY) return SlotFind::kAbsent;
        if (std::memcmp(slot_fingerprint(s), hash, KA_KEY_SLOT_FINGERPRINT) == 0) {
            slot = s;
            return slot_state(s) == KA_SLOT_INLINE ? SlotFind::kInline : SlotFind::kInRecord;
        }
    }
    return SlotFind::kAbsent;
}

}  // namespace keyauth
