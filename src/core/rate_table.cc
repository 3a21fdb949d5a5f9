#include "rate_table.h"

#include <algorithm>

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
struct RateSlot {
    uint64_t id_lo;
    uint32_t id_hi;
    uint32_t used;
    uint64_t tat;  // the GCRA state; changed only by compare-and-swap
    // keyauth_shared_limits: requests admitted here since the last exchange
    // (atomic add; taken by exchange for zero), and the key's effective rate
    // at the latest of them, which the exchange publishes beside the count
    uint32_t spent;
    uint32_t rate;
};

static_assert(sizeof(Header) == RateTable::kHeaderBytes, "header size");
static_assert(sizeof(RateSlot) == RateTable::kSlotBytes, "slot size");

using shm_slots::SlotId;

Header *header(const void *t) { return shm_slots::header<Header>(t); }
RateSlot *slots_of(const void *t) { return shm_slots::slots_of<Header, RateSlot>(t); }

// Admits or refuses against the slot's TAT; a failed CAS means another
// worker admitted a request of the same key in between: decide again. False,
// with nothing charged, if the slot now belongs to another key: the owner is
// checked after each read of the TAT, and an eviction resets the TAT before
// it changes the owner, so a TAT read from the new owner comes with its id.
bool admit(RateSlot &s, const SlotId &id, const GcraParams &p, uint64_t now,
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


// The rate before the count (release): whoever takes the count (acquire)
// sees a rate with it.
void count_spent(RateSlot &s, const GcraParams &p) {
    if (__atomic_load_n(&s.rate, __ATOMIC_RELAXED) != p.limit) {
        __atomic_store_n(&s.rate, p.limit, __ATOMIC_RELAXED);
    }
    __atomic_add_fetch(&s.spent, 1u, __ATOMIC_RELEASE);
}

// Under the lock: the slot of key, given one if it has none (the first
// unused slot of its window, else the one with the oldest TAT), in one pass.
// out says whether a live state was reused and whether the once-a-minute
// warning is due; with take_live false, null rather than reuse a live state.
RateSlot *claim(Header *h, RateSlot *slots, const SlotId &key, uint64_t now, RateCheck &out,
                bool take_live = true) {
    const uint64_t n = h->slots;
    RateSlot *victim = nullptr;
    uint64_t i = key.start(n);
    for (uint64_t k = 0; k < RateTable::kProbe && k < n; k++) {
        RateSlot &c = slots[i];
        if (++i == n) i = 0;
        // (shm_slots.h: the key's slot, if it has one, comes before this)
        if (__atomic_load_n(&c.used, __ATOMIC_ACQUIRE) == shm_slots::kNeverUsed) { victim = &c; break; }
        if (shm_slots::matches(c, key)) return &c;
        if (victim == nullptr || __atomic_load_n(&c.tat, __ATOMIC_ACQUIRE) <
                                     __atomic_load_n(&victim->tat, __ATOMIC_ACQUIRE)) {
            victim = &c;
        }
    }
    if (victim->used && __atomic_load_n(&victim->tat, __ATOMIC_ACQUIRE) > now) {
        if (!take_live) return nullptr;
        out.evicted_busy = true;
        h->busy_evictions++;
        if (h->last_warn_ns == 0 || now - h->last_warn_ns >= kWarnEveryNs) {
            h->last_warn_ns = now;
            out.warn = true;
        }
    }
    // state first, owner last: a reader that sees the new owner's id sees
    // its fresh state (see admit() and RateTable::drain())
    __atomic_store_n(&victim->used, uint32_t{shm_slots::kNeverUsed}, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->tat, uint64_t{0}, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->spent, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->rate, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->id_lo, key.lo, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->id_hi, key.hi, __ATOMIC_RELEASE);
    __atomic_store_n(&victim->used, uint32_t{shm_slots::kInUse}, __ATOMIC_RELEASE);
    return victim;
}

}  // namespace

bool RateTable::format(void *mem, size_t bytes) noexcept {
    return shm_slots::format<Header, RateSlot>(mem, bytes, kMagic, kProbe);
}

RateTable *RateTable::attach(void *mem, size_t bytes) noexcept {
    return shm_slots::holds_table<Header, RateSlot>(mem, bytes, kMagic) ? static_cast<RateTable *>(mem) : nullptr;
}

size_t RateTable::slots() const noexcept { return header(this)->slots; }

uint64_t RateTable::busy_evictions() const noexcept {
    return __atomic_load_n(&header(this)->busy_evictions, __ATOMIC_RELAXED);
}

void RateTable::prefetch(const unsigned char id[KA_ID_LEN]) const noexcept {
    shm_slots::prefetch(slots_of(this), header(this)->slots, SlotId::of(id));
}

RateCheck RateTable::check(const unsigned char id[KA_ID_LEN], const GcraParams &params,
                           uint64_t now, const RateLock &lock, bool share) noexcept {
    Header *h = header(this);
    RateSlot *slots = slots_of(this);
    const uint64_t n = h->slots;
    const SlotId key = SlotId::of(id);

    if (RateSlot *s = shm_slots::find(slots, n, kProbe, key)) {
        GcraDecision d;
        // the slot may be handed to another key meanwhile: retry below
        if (admit(*s, key, params, now, d)) {
            // (should the slot be reused in between, the count goes to its
            // new key: only with a full zone, which is logged)
            if (share && d.allowed) count_spent(*s, params);
            return RateCheck{d, false, false};
        }
    }

    lock.lock(lock.data);
    RateCheck out{};
    RateSlot *s = claim(h, slots, key, now, out);
    // evictions happen only under the lock: the slot stays ours
    (void)admit(*s, key, params, now, out.decision);
    if (share && out.decision.allowed) count_spent(*s, params);
    lock.unlock(lock.data);
    return out;
}

size_t RateTable::drain(SpentVisitor visit, void *data) {
    RateSlot *slots = slots_of(this);
    const uint64_t n = header(this)->slots;
    size_t keys = 0;
    unsigned char id[KA_ID_LEN];
    for (uint64_t i = 0; i < n; i++) {
        RateSlot &s = slots[i];
        if (__atomic_load_n(&s.spent, __ATOMIC_RELAXED) == 0) continue;
        const uint64_t lo = __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE);
        const uint32_t hi = __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE);
        const uint32_t spent = __atomic_exchange_n(&s.spent, 0u, __ATOMIC_ACQ_REL);
        const uint32_t rate = __atomic_load_n(&s.rate, __ATOMIC_RELAXED);
        // the slot was given to another key meanwhile (a full zone): whose
        // count this is cannot be told, so it is not published
        if (spent == 0 || rate == 0 || !__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE) != lo ||
            __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE) != hi) {
            continue;
        }
        store_le<uint64_t>(id, lo);
        store_le<uint32_t>(id + 8, hi);
        visit(data, id, spent, rate);
        keys++;
    }
    return keys;
}

uint32_t RateTable::known_rate(const unsigned char id[KA_ID_LEN]) const noexcept {
    const SlotId key = SlotId::of(id);
    RateSlot *s = shm_slots::find(slots_of(this), header(this)->slots, kProbe, key);
    if (s == nullptr) return 0;
    const uint32_t rate = __atomic_load_n(&s->rate, __ATOMIC_ACQUIRE);
    return shm_slots::matches(*s, key) ? rate : 0;
}

bool RateTable::fold(const unsigned char id[KA_ID_LEN], uint64_t charge, uint64_t ceiling_ns,
                     uint64_t now, const RateLock &lock) noexcept {
    Header *h = header(this);
    RateSlot *slots = slots_of(this);
    const SlotId key = SlotId::of(id);
    const uint64_t ceiling = now + ceiling_ns;

    RateSlot *s = shm_slots::find(slots, h->slots, kProbe, key);
    bool locked = false;
    if (s == nullptr) {
        lock.lock(lock.data);
        locked = true;
        RateCheck ignored{};
        s = claim(h, slots, key, now, ignored, false);
        if (s == nullptr) {
            lock.unlock(lock.data);
            return false;
        }
    }
    uint64_t tat = __atomic_load_n(&s->tat, __ATOMIC_ACQUIRE);
    // a slot handed to another key meanwhile (only possible unlocked) keeps
    // its state: the charge is dropped, as an evicted key's state is
    while (shm_slots::matches(*s, key) &&
           !__atomic_compare_exchange_n(&s->tat, &tat,
                                        std::min(std::max(tat, now) + charge,
                                                 std::max(tat, ceiling)),
                                        false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    if (locked) lock.unlock(lock.data);
    return true;
}

}  // namespace keyauth
