// What the two tables in the keyauth_zone (rate_table, usage_table) share:
// a fixed region of a header then slots, each slot keyed by a 12-byte id
// held as two words that other workers read with atomic loads, and a short
// linear probe from a start slot derived from the id's random bytes.
// A Header has `magic` and `slots`; a Slot has `id_lo`, `id_hi` and `used`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "keyauth_schema.h"
#include "le.h"

namespace keyauth::shm_slots {

// An id as the slots hold it, and where its probe starts in n slots.
struct SlotId {
    uint64_t lo;
    uint32_t hi;

    static SlotId of(const unsigned char id[KA_ID_LEN]) noexcept {
        return SlotId{load_le<uint64_t>(id), load_le<uint32_t>(id + 8)};
    }
    uint64_t start(uint64_t n) const noexcept {
        // bytes 6..11 of an id are random, the low ones a creation time
        return ((lo >> 48 | static_cast<uint64_t>(hi) << 16) * 0x9e3779b97f4a7c15ULL) % n;
    }
};

template <class Header>
Header *header(const void *table) noexcept {
    return static_cast<Header *>(const_cast<void *>(table));
}

template <class Header, class Slot>
Slot *slots_of(const void *table) noexcept {
    return reinterpret_cast<Slot *>(static_cast<unsigned char *>(const_cast<void *>(table)) + sizeof(Header));
}

template <class Slot>
bool matches(const Slot &s, const SlotId &id) noexcept {
    return __atomic_load_n(&s.used, __ATOMIC_ACQUIRE) &&
           __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE) == id.lo &&
           __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE) == id.hi;
}

// The slot holding id among the probe window from its start, or null.
template <class Slot>
Slot *find(Slot *slots, uint64_t n, size_t probe, const SlotId &id) noexcept {
    const uint64_t start = id.start(n);
    for (uint64_t i = 0; i < probe && i < n; i++) {
        Slot &s = slots[(start + i) % n];
        if (matches(s, id)) return &s;
    }
    return nullptr;
}

// Formats `bytes` of memory as an empty table; false if too small.
template <class Header, class Slot>
bool format(void *mem, size_t bytes, uint64_t magic, size_t probe) noexcept {
    if (bytes < sizeof(Header) + probe * sizeof(Slot)) return false;
    std::memset(mem, 0, bytes);
    Header *h = header<Header>(mem);
    h->slots = (bytes - sizeof(Header)) / sizeof(Slot);
    h->magic = magic;
    return true;
}

// True if mem holds a table of this kind and size (formatted by a worker of
// an earlier cycle, kept across a reload).
template <class Header, class Slot>
bool holds_table(const void *mem, size_t bytes, uint64_t magic) noexcept {
    const Header *h = header<Header>(mem);
    return bytes >= sizeof(Header) && h->magic == magic &&
           h->slots == (bytes - sizeof(Header)) / sizeof(Slot);
}

}  // namespace keyauth::shm_slots
