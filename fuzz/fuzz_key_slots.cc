// The hot table as the edge reads it, over arbitrary bytes (as if LMDB held
// garbage): the header decoder, the slot decoder, and the lookup over chunks
// of any content, which must never read outside the chunks it was given.
// An INLINE slot that decodes must encode back to the same bytes.
#include <cstring>
#include <string>
#include <vector>

#include "key_slots.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    KeySlotsHeader raw;
    decode_key_slots_header(data, size, raw);
    if (size < 3 + KA_HASH_LEN) return 0;

    // A small table whose shape comes from the first bytes, its slots from the rest.
    KeySlotsHeader h;
    h.capacity = 1 + data[0] % 64;
    h.chunk_slots = 1 + data[1] % 8;
    h.slots = ((h.capacity + h.chunk_slots) / h.chunk_slots + 1) * h.chunk_slots;
    h.max_probe = 1 + data[2] % KA_KEY_SLOTS_MAX_PROBE;
    std::string header = encode_key_slots_header(h);
    KeySlotsHeader back;
    if (decode_key_slots_header(header.data(), header.size(), back) != DecodeStatus::kOk) __builtin_trap();
    const unsigned char *hash = data + 3;
    const unsigned char *body = hash + KA_HASH_LEN;
    const size_t body_len = size - 3 - KA_HASH_LEN;
    std::vector<std::vector<unsigned char>> chunks(h.chunks());
    size_t off = 0;
    for (auto &chunk : chunks) {
        chunk.assign(h.chunk_bytes(), 0);
        size_t n = std::min(chunk.size(), body_len - std::min(off, body_len));
        if (n != 0) std::memcpy(chunk.data(), body + off, n);
        off += chunk.size();
    }
    const unsigned char *slot = nullptr;
    auto get_chunk = [&](uint64_t n) -> const unsigned char * {
        return n < chunks.size() && (data[1] & 0x80) == 0 ? chunks[n].data() : nullptr;
    };
    if (find_key_slot(h, hash, get_chunk, slot) == SlotFind::kInline) {
        KeyRecordView view;
        if (decode_key_slot(slot, view) == DecodeStatus::kOk) {
            view.grants("ip:read");
            unsigned char again[KA_KEY_SLOT_SIZE];
            encode_key_slot(slot_fingerprint(slot), view, again);
            // what the slot's padding held is not part of what it says
            KeyRecordView twice;
            if (decode_key_slot(again, twice) != DecodeStatus::kOk || twice.status != view.status ||
                twice.expires_ms != view.expires_ms || twice.requested_rpm != view.requested_rpm ||
                twice.scopes != view.scopes || std::memcmp(twice.key_id, view.key_id, KA_ID_LEN) != 0 ||
                std::memcmp(twice.account_id, view.account_id, KA_ID_LEN) != 0)
                __builtin_trap();
        }
    }
    return 0;
}
