// What the edge read from one LMDB snapshot, remembered for the requests
// that follow in the same snapshot: a busy worker sees the same few keys and
// accounts again and again, and each would otherwise cost a B-tree descent
// and a decode. Direct-mapped on the first bytes of the lookup key (random:
// a SHA-256 digest, or an id's random half); an entry is valid only for the
// snapshot generation it was read in, so a commit is seen by the very next
// request, and views into the map never outlive the snapshot they point
// into (EdgeStore counts a new generation whenever it takes a new one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace keyauth {

template <size_t KeyLen, size_t HashAt, typename Value>
class SnapshotCache {
public:
    // The value read for key in this generation, or null.
    const Value *find(const unsigned char *key, uint64_t generation) const noexcept {
        const Entry &e = slots_[slot_of(key)];
        return e.generation == generation && std::memcmp(e.key, key, KeyLen) == 0 ? &e.value
                                                                                     : nullptr;
    }

    const Value &put(const unsigned char *key, uint64_t generation, const Value &value) noexcept {
        Entry &e = slots_[slot_of(key)];
        e.generation = generation;
        std::memcpy(e.key, key, KeyLen);
        e.value = value;
        return e.value;
    }

private:
    static constexpr size_t kSlots = 256;
    static_assert(HashAt + 2 <= KeyLen, "the slot comes from two key bytes");
    static size_t slot_of(const unsigned char *key) noexcept {
        return (key[HashAt] | key[HashAt + 1] << 8) % kSlots;
    }

    struct Entry {
        uint64_t generation = 0;  // 0: empty (a store's generations start at 1)
        unsigned char key[KeyLen] = {};
        Value value{};
    };
    Entry slots_[kSlots];
};

}  // namespace keyauth
