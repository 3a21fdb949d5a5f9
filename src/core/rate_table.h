// Per-key GCRA state in a fixed region of memory shared by every nginx
// worker (the keyauth_zone). Each key owns one 32-byte slot; admission is one
// compare-and-swap on the slot's TAT, with no lock. The zone lock is taken
// only to give a key a slot: an unused one, else the one with the oldest TAT
// (an idle state, whose TAT has passed, carries no information; reusing a
// busy one is logged, at most once a minute).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gcra.h"
#include "keyauth_schema.h"

namespace keyauth {

struct RateLock {
    void (*lock)(void *);
    void (*unlock)(void *);
    void *data;
};

struct RateCheck {
    GcraDecision decision;
    bool evicted_busy;  // a key's live state was reused for this one
    bool warn;          // ... and the once-a-minute warning is due
};

class RateTable {
public:
    static constexpr size_t kSlotBytes = 32;
    static constexpr size_t kHeaderBytes = 64;
    static constexpr size_t kProbe = 16;  // slots searched for a key: 512 bytes

    // Formats `bytes` of memory as an empty table; false if too small.
    static bool format(void *mem, size_t bytes) noexcept;
    // The table in mem, or null if mem does not hold one (of this size).
    static RateTable *attach(void *mem, size_t bytes) noexcept;

    size_t slots() const noexcept;
    uint64_t busy_evictions() const noexcept;

    // Starts loading id's slot ahead of check() (shm_slots::prefetch).
    void prefetch(const unsigned char id[KA_ID_LEN]) const noexcept;

    // share: also count an admitted request as spent here for the next
    // exchange with other edges (keyauth_shared_limits).
    RateCheck check(const unsigned char id[KA_ID_LEN], const GcraParams &params, uint64_t now_ns,
                    const RateLock &lock, bool share = false) noexcept;

    // What drain() hands on for each key that spent requests here since the
    // previous drain: the count, and the key's effective rate then.
    using SpentVisitor = void (*)(void *data, const unsigned char id[KA_ID_LEN], uint32_t spent,
                                  uint32_t rate_per_minute);
    // Takes every key's spent count (exchanged for zero: a count is taken by
    // exactly one caller) and returns how many keys had one. visit may throw:
    // the counts taken before are then lost, the others stay.
    size_t drain(SpentVisitor visit, void *data);

    // The key's effective rate at this edge's latest admission of it while
    // sharing (what drain() publishes beside the count), or 0 if this edge
    // has no such admission in the key's state (it has not served the key).
    uint32_t known_rate(const unsigned char id[KA_ID_LEN]) const noexcept;

    // Charges what other edges admitted, already bounded by the caller
    // (shared_exchange.cc, docs/shared-limits.md): the key's TAT moves on by
    // charge_ns from max(TAT, now), as if those requests had been admitted
    // here now, without a limit check (they were served already), but never
    // past now + ceiling_ns (a TAT already past it is left as it is). A key
    // without a slot gets one (an edge learns of a key it has not served)
    // unless that would reuse a live state of another key: then false,
    // nothing charged (the zone is too small for the fleet's keys).
    bool fold(const unsigned char id[KA_ID_LEN], uint64_t charge_ns, uint64_t ceiling_ns,
              uint64_t now_ns, const RateLock &lock) noexcept;

private:
    RateTable() = delete;
};

}  // namespace keyauth
