// What the two tables in the keyauth_zone (rate_table, usage_table) share:
// a fixed region of a header then slots, each slot keyed by a 12-byte id
// held as two words that other workers read with atomic loads, and a short
// linear probe from a start slot derived from the id's random bytes.
// A Header has `magic` and `slots`; a Slot has `id_lo`, `id_hi` and `used`.
//
// `used` is one of the three states below. A key is given the first slot of
// its window that holds no key, and only after a search for it failed; a
// slot that held a key never becomes kNeverUsed again (the usage table marks
// a freed slot kFreed, the rate table hands a slot from key to key). So a
// key's slot comes before any kNeverUsed slot of its window, and a search
// stops at the first one: a key seen for the first time costs a slot or
// two, not the whole window. A search without the lock that meets a slot
// changing hands (kNeverUsed for a moment in the rate table) may stop short;
// the callers then take the lock, under which nothing changes hands, and
// search again.
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
        // bytes 6..11 of an id are random, the low ones a creation time;
        // mixed, then scaled to [0, n) by a multiplication rather than a
        // division (twice a table a request: about 20 ns of divisions).
        // A zone is only ever reused by the same module image (nginx
        // matches a reused zone's tag, the module's address), so no two
        // builds place keys in one zone.
        const uint64_t mixed = (lo >> 48 | static_cast<uint64_t>(hi) << 16) * 0x9e3779b97f4a7c15ULL;
        return static_cast<uint64_t>((static_cast<unsigned __int128>(mixed) * n) >> 64);
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

// kSpill (the usage table only): a key's counts of an hour that ended,
// moved out of its slot by its first count of the next hour, until the
// collector takes them; never found by find(), never given to a key.
enum SlotState : uint32_t { kNeverUsed = 0, kInUse = 1, kFreed = 2, kSpill = 3 };

template <class Slot>
bool matches(const Slot &s, const SlotId &id) noexcept {
    return __atomic_load_n(&s.used, __ATOMIC_ACQUIRE) == kInUse &&
           __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE) == id.lo &&
           __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE) == id.hi;
}

// The slot holding id in the probe window from its start, or null; the
// window ends early at a kNeverUsed slot (above) and wraps by a compare, not
// a division: this runs on every request.
template <class Slot>
Slot *find(Slot *slots, uint64_t n, size_t probe, const SlotId &id) noexcept {
    uint64_t i = id.start(n);
    for (uint64_t k = 0; k < probe && k < n; k++) {
        Slot &s = slots[i];
        const uint32_t used = __atomic_load_n(&s.used, __ATOMIC_ACQUIRE);
        if (used == kNeverUsed) return nullptr;
        if (used == kInUse && __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE) == id.lo &&
            __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE) == id.hi) {
            return &s;
        }
        if (++i == n) i = 0;
    }
    return nullptr;
}

// Starts loading the first slot of id's window (where find() nearly always
// ends): the request path asks for its rate and usage slots together, so
// that their cache and TLB misses overlap instead of following each other.
template <class Slot>
void prefetch(const Slot *slots, uint64_t n, const SlotId &id) noexcept {
    __builtin_prefetch(&slots[id.start(n)], 1, 3);
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
