#include "key_slots.h"

#include <cstring>

#include "le.h"

namespace keyauth {
namespace {

using H = ka_key_slots_header_v1;
using S = ka_key_slot_v1;

constexpr uint64_t kMaxSlots = uint64_t{1} << 40;
constexpr uint32_t kMaxChunkSlots = uint32_t{1} << 20;
constexpr int64_t kMaxU48 = (int64_t{1} << 48) - 1;

}  // namespace

std::string encode_key_slots_header(const KeySlotsHeader &h) {
    unsigned char b[KA_KEY_SLOTS_HEADER_SIZE] = {};
    store_le<uint16_t>(b + offsetof(H, version), h.version);
    store_le<uint16_t>(b + offsetof(H, slot_size), KA_KEY_SLOT_SIZE);
    store_le<uint32_t>(b + offsetof(H, chunk_slots), h.chunk_slots);
    store_le<uint64_t>(b + offsetof(H, capacity), h.capacity);
    store_le<uint64_t>(b + offsetof(H, slots), h.slots);
    store_le<uint64_t>(b + offsetof(H, count), h.count);
    store_le<uint32_t>(b + offsetof(H, max_probe), h.max_probe);
    return std::string(reinterpret_cast<const char *>(b), sizeof b);
}

DecodeStatus decode_key_slots_header(const void *data, size_t len, KeySlotsHeader &h) noexcept {
    const auto *p = static_cast<const unsigned char *>(data);
    if (len < 2) return DecodeStatus::kCorrupt;
    h.version = load_le<uint16_t>(p);
    if (h.version != KA_KEY_SLOTS_V1 && h.version != KA_KEY_SLOTS_V2) return DecodeStatus::kUnknownVersion;
    if (len != KA_KEY_SLOTS_HEADER_SIZE) return DecodeStatus::kCorrupt;
    const uint16_t slot_size = load_le<uint16_t>(p + offsetof(H, slot_size));
    h.chunk_slots = load_le<uint32_t>(p + offsetof(H, chunk_slots));
    h.capacity = load_le<uint64_t>(p + offsetof(H, capacity));
    h.slots = load_le<uint64_t>(p + offsetof(H, slots));
    h.count = load_le<uint64_t>(p + offsetof(H, count));
    h.max_probe = load_le<uint32_t>(p + offsetof(H, max_probe));
    const bool ok = slot_size == KA_KEY_SLOT_SIZE && h.chunk_slots != 0 &&
                    h.chunk_slots <= kMaxChunkSlots && h.capacity != 0 &&
                    h.slots > h.capacity && h.slots <= kMaxSlots && h.slots % h.chunk_slots == 0 &&
                    h.count <= h.slots && h.max_probe != 0 &&
                    h.max_probe <= KA_KEY_SLOTS_MAX_PROBE;
    return ok ? DecodeStatus::kOk : DecodeStatus::kCorrupt;
}

void chunk_key(uint64_t n, unsigned char out[4]) noexcept {
    for (int i = 0; i < 4; i++) out[i] = static_cast<unsigned char>(n >> (8 * (3 - i)));
}

uint64_t home_slot(const unsigned char *hash, uint64_t capacity) noexcept {
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h = h << 8 | hash[i];
    return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * capacity) >> 64);
}

void encode_in_record_slot(const unsigned char *hash, const unsigned char *key_id, unsigned char *out) noexcept {
    std::memset(out, 0, KA_KEY_SLOT_SIZE);
    out[offsetof(S, state)] = KA_SLOT_IN_RECORD;
    std::memcpy(out + offsetof(S, fingerprint), hash, KA_KEY_SLOT_FINGERPRINT);
    if (key_id != nullptr) std::memcpy(out + offsetof(S, key_id), key_id, KA_ID_LEN);
}

void encode_key_slot(const unsigned char *hash, const KeyRecordView &key, unsigned char *out) noexcept {
    const bool rolled = key.rate_id != nullptr && std::memcmp(key.rate_id, key.key_id, KA_ID_LEN) != 0;
    // A key with its own quota, allowedIps or meta has no room inline: the
    // edge reads its record.
    if (rolled || !key.quota.none() || !key.allowed_ips.empty() || !key.meta.empty() ||
        key.scopes.size() > KA_KEY_SLOT_SCOPE_BYTES ||
        key.expires_ms < 0 || key.expires_ms > kMaxU48) {
        return encode_in_record_slot(hash, key.key_id, out);
    }
    std::memset(out, 0, KA_KEY_SLOT_SIZE);
    out[offsetof(S, state)] = KA_SLOT_INLINE;
    out[offsetof(S, status)] = key.status;
    out[offsetof(S, scope_count)] = key.scope_count;
    out[offsetof(S, scopes_bytes)] = static_cast<unsigned char>(key.scopes.size());
    store_le<uint32_t>(out + offsetof(S, requested_rpm), key.requested_rpm);
    std::memcpy(out + offsetof(S, fingerprint), hash, KA_KEY_SLOT_FINGERPRINT);
    std::memcpy(out + offsetof(S, key_id), key.key_id, KA_ID_LEN);
    std::memcpy(out + offsetof(S, account_id), key.account_id, KA_ID_LEN);
    for (int i = 0; i < 6; i++) {
        out[offsetof(S, expires_ms) + i] = static_cast<unsigned char>(static_cast<uint64_t>(key.expires_ms) >> (8 * i));
    }
    std::memcpy(out + offsetof(S, scopes), key.scopes.data(), key.scopes.size());
}

DecodeStatus decode_key_slot(const unsigned char *slot, KeyRecordView &out) noexcept {
    out = KeyRecordView{};
    out.version = KA_KEY_RECORD_V2;
    out.status = slot[offsetof(S, status)];
    out.scope_count = slot[offsetof(S, scope_count)];
    const size_t scopes_bytes = slot[offsetof(S, scopes_bytes)];
    out.requested_rpm = load_le<uint32_t>(slot + offsetof(S, requested_rpm));
    out.key_id = slot + offsetof(S, key_id);
    out.account_id = slot + offsetof(S, account_id);
    out.rate_id = out.key_id;
    uint64_t expires = 0;
    for (int i = 5; i >= 0; i--) expires = expires << 8 | slot[offsetof(S, expires_ms) + i];
    out.expires_ms = static_cast<int64_t>(expires);
    if (slot_state(slot) != KA_SLOT_INLINE || scopes_bytes > KA_KEY_SLOT_SCOPE_BYTES ||
        (out.status != KA_KEY_ACTIVE && out.status != KA_KEY_REVOKED)) {
        return DecodeStatus::kCorrupt;
    }
    out.scopes = std::string_view(reinterpret_cast<const char *>(slot + offsetof(S, scopes)), scopes_bytes);
    return packed_scopes_ok(out.scopes, out.scope_count) ? DecodeStatus::kOk : DecodeStatus::kCorrupt;
}

}  // namespace keyauth
