// Per-key usage counts in a fixed region of memory shared by every nginx
// worker (a share of the keyauth_zone). The request path counts with atomics
// only: one fetch-add and one store on the key's slot; the zone lock is
// taken only to give a key its slot. One worker collects off the request
// path: it exchanges each slot's deltas for zero and hands them on, so a
// count is collected exactly once whichever worker (old or new, across a
// reload) collects it.
//
// Slots are keyed by key id (the account id rides along). A delta carries
// the time of its last counted call, and every count in it was made in that
// UTC hour: a key's first count of a new hour, while its slot still holds
// counts of the hour before, sets that slot aside (a spill slot, which the
// next collection hands on and frees) and gives the key a new one (so each
// hour's counts are filed in their hour, as the quota ledger charges them,
// however long a walk of the zone takes).
// A slot whose key
// has not been used for `idle_ms` and holds no delta is freed by collect();
// a table with no free slot in a key's probe window counts the request as
// dropped (drops(), and warn once a minute) instead of counting it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "keyauth_schema.h"
#include "rate_table.h"

namespace keyauth {

struct UsageDelta {
    unsigned char account_id[KA_ID_LEN];
    unsigned char key_id[KA_ID_LEN];
    uint64_t allowed;
    uint64_t rate_limited;
    int64_t last_used_ms;
    uint64_t quota_exceeded;  // refused with 429 QUOTA_EXCEEDED
    uint64_t units;           // units charged
};

// What one request adds to its key's slot.
enum class UsageOutcome : uint8_t {
    kAllowed,        // let through
    kRateLimited,    // 429 RATE_LIMITED
    kQuotaExceeded,  // 429 QUOTA_EXCEEDED
    kUnitsOnly,      // units an admitted call was charged after its answer
};

struct UsageCount {
    bool counted;  // false: no slot, the request went into drops()
    bool warn;     // ... and the once-a-minute warning is due
};

class UsageTable {
public:
    static constexpr size_t kSlotBytes = 64;
    static constexpr size_t kHeaderBytes = 64;
    static constexpr size_t kProbe = 32;

    static bool format(void *mem, size_t bytes) noexcept;
    static UsageTable *attach(void *mem, size_t bytes) noexcept;

    size_t slots() const noexcept;
    uint64_t drops() const noexcept;

    // Starts loading the key's slot ahead of count() (shm_slots::prefetch).
    void prefetch(const unsigned char key_id[KA_ID_LEN]) const noexcept;

    // The request path: one request of the key (or, kUnitsOnly, the units of
    // one counted before) and the units it was charged.
    UsageCount count(const unsigned char account_id[KA_ID_LEN],
                     const unsigned char key_id[KA_ID_LEN], UsageOutcome outcome, uint64_t units,
                     int64_t now_ms,
                     uint64_t now_ns, const RateLock &lock) noexcept;

    // Off the request path: calls sink(delta) for every slot in [from, to)
    // with counts since the last collection (the deltas are zero afterwards),
    // and frees slots idle since before now_ms - idle_ms. Returns the deltas
    // handed on. Slots in pieces, so a caller's buffer stays small.
    template <typename Sink>
    size_t collect(size_t from, size_t to, int64_t now_ms, int64_t idle_ms, const RateLock &lock,
                   Sink &&sink) noexcept;

    // Gives deltas back (a collection that could not be stored): to the
    // key's slot if it still has one, else they are counted as drops.
    void restore(const UsageDelta &d, const RateLock &lock) noexcept;

private:
    UsageTable() = delete;
    // A count in a new hour of a slot (a UsageSlot) still holding an
    // earlier hour's counts: the slot is set aside as a spill slot and the
    // key given a new one (usage_table.cc), which is returned (null: look
    // the key up again).
    void *split_at_hour(void *slot, int64_t now_ms, const RateLock &lock) noexcept;
    // Slot i if it is a spill slot: its delta, and the slot freed.
    bool take_spill(size_t i, UsageDelta &out, const RateLock &lock) noexcept;
    // One slot: its delta (exchanged for zero) or false if the slot is free.
    bool take(size_t i, UsageDelta &out) noexcept;
    // Frees slot i if it is idle since before `before_ms` and empty; a count
    // that raced the freeing is handed back in `out` (true).
    bool free_if_idle(size_t i, int64_t before_ms, UsageDelta &out, const RateLock &lock) noexcept;
};

template <typename Sink>
size_t UsageTable::collect(size_t from, size_t to, int64_t now_ms, int64_t idle_ms,
                           const RateLock &lock, Sink &&sink) noexcept {
    size_t handed = 0;
    if (to > slots()) to = slots();
    for (size_t i = from; i < to; i++) {
        UsageDelta d;
        if (take_spill(i, d, lock) || take(i, d)) {
            sink(d);
            handed++;
        } else if (free_if_idle(i, now_ms - idle_ms, d, lock)) {
            sink(d);
            handed++;
        }
    }
    return handed;
}

}  // namespace keyauth
