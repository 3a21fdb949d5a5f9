#include "rate_table.h"

#include "shm_slots.h"

namespace keyauth {
namespace {

constexpr uint64_t kMagic = 0x3154524854554b41ULL;  // "AKUTHRT1"
constexpr uint64_t kWarnEveryNs = 60 * kNanosPerSecond;

struct Header {
    uint64_t magic;
    uint64_t slots;
    uint64_t last_warn_ns;   // under the lock
    uint64_t busy_evictions; // under the lock
    uint64_t reserved[4];
};

// The key id is split into two words so that it is read and written with
// atomic loads and stores (other workers read it without the lock).
struct Slot {
    uint64_t id_lo;
    uint32_t id_hi;
    uint32_t used;
    uint64_t tat;  // the GCRA state; changed only by compare-and-swap
    uint64_t reserved;
};

static_assert(sizeof(Header) == RateTable::kHeaderBytes, "header size");
static_assert(sizeof(Slot) == RateTable::kSlotBytes, "slot size");

using shm_slots::SlotId;

Header *header(const void *t) { return shm_slots::header<Header>(t); }
Slot *slots_of(const void *t) { return shm_slots::slots_of<Header, Slot>(t); }

// Admits or refuses against the slot's TAT; a failed CAS means another
// worker admitted a request of the same key in between: decide again. False,
// with nothing charged, if the slot now belongs to another key: the owner is
// checked after each read of the TAT, and an eviction resets the TAT before
// it changes the owner, so a TAT read from the new owner comes with its id.
bool admit(Slot &s, const SlotId &id, const GcraParams &p, uint64_t now,
           GcraDecision &d) {
    uint64_t tat = __atomic_load_n(&s.tat, __ATOMIC_ACQUIRE);
    for (;;) {
        if (!shm_slots::matches(s, id)) return false;
        d = gcra_decide(tat, now, p);
        if (!d.allowed ||
            __atomic_compare_exchange_n(&s.tat, &tat, d.new_tat, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return true;
        }
    }
}

}  // namespace

bool RateTable::format(void *mem, size_t bytes) noexcept {
    return shm_slots::format<Header, Slot>(mem, bytes, kMagic, kProbe);
}

RateTable *RateTable::attach(void *mem, size_t bytes) noexcept {
    return shm_slots::holds_table<Header, Slot>(mem, bytes, kMagic) ? static_cast<RateTable *>(mem) : nullptr;
}

size_t RateTable::slots() const noexcept { return header(this)->slots; }

uint64_t RateTable::busy_evictions() const noexcept {
    return __atomic_load_n(&header(this)->busy_evictions, __ATOMIC_RELAXED);
}

RateCheck RateTable::check(const unsigned char id[KA_ID_LEN], const GcraParams &params,
                           uint64_t now, const RateLock &lock) noexcept {
    Header *h = header(this);
    Slot *slots = slots_of(this);
    const uint64_t n = h->slots;
    const SlotId key = SlotId::of(id);
    const uint64_t start = key.start(n);

    if (Slot *s = shm_slots::find(slots, n, kProbe, key)) {
        GcraDecision d;
        // the slot may be handed to another key meanwhile: retry below
        if (admit(*s, key, params, now, d)) return RateCheck{d, false, false};
    }

    lock.lock(lock.data);
    RateCheck out{};
    Slot *s = shm_slots::find(slots, n, kProbe, key);
    if (s == nullptr) {
        Slot *victim = nullptr;
        for (uint64_t i = 0; i < kProbe && i < n; i++) {
            Slot &c = slots[(start + i) % n];
            if (!__atomic_load_n(&c.used, __ATOMIC_ACQUIRE)) { victim = &c; break; }
            if (victim == nullptr || __atomic_load_n(&c.tat, __ATOMIC_ACQUIRE) <
                                         __atomic_load_n(&victim->tat, __ATOMIC_ACQUIRE)) {
                victim = &c;
            }
        }
        if (victim->used && __atomic_load_n(&victim->tat, __ATOMIC_ACQUIRE) > now) {
            out.evicted_busy = true;
            h->busy_evictions++;
            if (h->last_warn_ns == 0 || now - h->last_warn_ns >= kWarnEveryNs) {
                h->last_warn_ns = now;
                out.warn = true;
            }
        }
        __atomic_store_n(&victim->used, 0u, __ATOMIC_RELEASE);
        __atomic_store_n(&victim->tat, uint64_t{0}, __ATOMIC_RELEASE);
        __atomic_store_n(&victim->id_lo, key.lo, __ATOMIC_RELEASE);
        __atomic_store_n(&victim->id_hi, key.hi, __ATOMIC_RELEASE);
        __atomic_store_n(&victim->used, 1u, __ATOMIC_RELEASE);
        s = victim;
    }
    // evictions happen only under the lock: the slot stays ours
    (void)admit(*s, key, params, now, out.decision);
    lock.unlock(lock.data);
    return out;
}

}  // namespace keyauth
