#include "usage_table.h"

#include <cstring>

#include "gcra.h"
#include "le.h"
#include "shm_slots.h"
#include "usage_bucket.h"

namespace keyauth {
namespace {

constexpr uint64_t kMagic = 0x3254535548544b41ULL;  // "AKTHUST2"
constexpr uint64_t kWarnEveryNs = 60 * kNanosPerSecond;

struct Header {
    uint64_t magic;
    uint64_t slots;
    uint64_t drops;         // atomic
    uint64_t last_warn_ns;  // atomic (compare-and-swap)
    uint64_t reserved[4];
};

// The key id is split into two words so that it is read and written with
// atomic loads and stores; the account id is written under the lock before
// `used` is set (release) and read after `used` (acquire).
struct UsageSlot {
    uint64_t id_lo;
    uint32_t id_hi;
    // shm_slots::SlotState. A zone kept from a version without kFreed holds
    // its freed slots as kNeverUsed: a key probing past one may be given a
    // second slot, which is collected like the first (nothing is lost).
    uint32_t used;
    int64_t last_used_ms;     // atomic maximum
    uint64_t allowed;         // deltas since the last collection: atomic add,
    uint64_t rate_limited;    // exchanged for zero by the collector
    uint64_t units;
    unsigned char account_id[KA_ID_LEN];
    uint32_t quota_exceeded;  // a collection's worth never nears 2^32
};  // one cache line a slot: keys never share one

static_assert(sizeof(Header) == UsageTable::kHeaderBytes, "header size");
static_assert(sizeof(UsageSlot) == UsageTable::kSlotBytes, "slot size");

using shm_slots::SlotId;

Header *header(const void *t) { return shm_slots::header<Header>(t); }
UsageSlot *slots_of(const void *t) { return shm_slots::slots_of<Header, UsageSlot>(t); }
UsageSlot *find(UsageSlot *slots, uint64_t n, const SlotId &id) {
    return shm_slots::find(slots, n, UsageTable::kProbe, id);
}

void add(UsageSlot &s, UsageOutcome outcome, uint64_t units, int64_t now_ms) {
    if (outcome != UsageOutcome::kUnitsOnly) {
        // last use first: a slot used since the collector's idle check is not freed
        int64_t cur = __atomic_load_n(&s.last_used_ms, __ATOMIC_ACQUIRE);
        while (now_ms > cur && !__atomic_compare_exchange_n(&s.last_used_ms, &cur, now_ms, false,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        }
    }
    switch (outcome) {
    case UsageOutcome::kAllowed: __atomic_fetch_add(&s.allowed, uint64_t{1}, __ATOMIC_ACQ_REL); break;
    case UsageOutcome::kRateLimited: __atomic_fetch_add(&s.rate_limited, uint64_t{1}, __ATOMIC_ACQ_REL); break;
    case UsageOutcome::kQuotaExceeded: __atomic_fetch_add(&s.quota_exceeded, 1u, __ATOMIC_ACQ_REL); break;
    case UsageOutcome::kUnitsOnly: break;
    }
    if (units != 0) __atomic_fetch_add(&s.units, units, __ATOMIC_ACQ_REL);
}

void ids_of(const UsageSlot &s, UsageDelta &d) {
    store_le<uint64_t>(d.key_id, __atomic_load_n(&s.id_lo, __ATOMIC_ACQUIRE));
    store_le<uint32_t>(d.key_id + 8, __atomic_load_n(&s.id_hi, __ATOMIC_ACQUIRE));
    std::memcpy(d.account_id, s.account_id, KA_ID_LEN);
}

bool has_counts(const UsageSlot &s) {
    return __atomic_load_n(&s.allowed, __ATOMIC_ACQUIRE) != 0 ||
           __atomic_load_n(&s.rate_limited, __ATOMIC_ACQUIRE) != 0 ||
           __atomic_load_n(&s.quota_exceeded, __ATOMIC_ACQUIRE) != 0 ||
           __atomic_load_n(&s.units, __ATOMIC_ACQUIRE) != 0;
}

// The slot's deltas, exchanged for zero; true if any.
bool exchange(UsageSlot &s, UsageDelta &d) {
    d.allowed = __atomic_exchange_n(&s.allowed, uint64_t{0}, __ATOMIC_ACQ_REL);
    d.rate_limited = __atomic_exchange_n(&s.rate_limited, uint64_t{0}, __ATOMIC_ACQ_REL);
    d.quota_exceeded = __atomic_exchange_n(&s.quota_exceeded, 0u, __ATOMIC_ACQ_REL);
    d.units = __atomic_exchange_n(&s.units, uint64_t{0}, __ATOMIC_ACQ_REL);
    d.last_used_ms = __atomic_load_n(&s.last_used_ms, __ATOMIC_ACQUIRE);
    return d.allowed != 0 || d.rate_limited != 0 || d.quota_exceeded != 0 || d.units != 0;
}

}  // namespace

bool UsageTable::format(void *mem, size_t bytes) noexcept {
    return shm_slots::format<Header, UsageSlot>(mem, bytes, kMagic, kProbe);
}

UsageTable *UsageTable::attach(void *mem, size_t bytes) noexcept {
    return shm_slots::holds_table<Header, UsageSlot>(mem, bytes, kMagic) ? static_cast<UsageTable *>(mem) : nullptr;
}

size_t UsageTable::slots() const noexcept { return header(this)->slots; }

uint64_t UsageTable::drops() const noexcept {
    return __atomic_load_n(&header(this)->drops, __ATOMIC_RELAXED);
}

void UsageTable::prefetch(const unsigned char key_id[KA_ID_LEN]) const noexcept {
    shm_slots::prefetch(slots_of(this), header(this)->slots, SlotId::of(key_id));
}

namespace {

// Under the lock: the first slot of id's window that holds nothing (never
// used, or freed), made id's, or null if the window is full. `last_used_ms`
// the call's time (0 for units alone, which are not a use): a slot just
// claimed is never taken for idle and freed before its first count lands.
UsageSlot *claim(UsageSlot *slots, uint64_t n, const SlotId &id, const unsigned char account_id[KA_ID_LEN],
                 int64_t last_used_ms) {
    const uint64_t start = id.start(n);
    for (uint64_t i = 0; i < UsageTable::kProbe && i < n; i++) {
        UsageSlot &c = slots[(start + i) % n];
        const uint32_t used = __atomic_load_n(&c.used, __ATOMIC_ACQUIRE);
        if (used == shm_slots::kInUse || used == shm_slots::kSpill) continue;
        // a free slot holds no delta: the collector took them when it freed it
        __atomic_store_n(&c.allowed, uint64_t{0}, __ATOMIC_RELEASE);
        __atomic_store_n(&c.rate_limited, uint64_t{0}, __ATOMIC_RELEASE);
        __atomic_store_n(&c.quota_exceeded, 0u, __ATOMIC_RELEASE);
        __atomic_store_n(&c.units, uint64_t{0}, __ATOMIC_RELEASE);
        __atomic_store_n(&c.last_used_ms, last_used_ms, __ATOMIC_RELEASE);
        std::memcpy(c.account_id, account_id, KA_ID_LEN);
        __atomic_store_n(&c.id_lo, id.lo, __ATOMIC_RELEASE);
        __atomic_store_n(&c.id_hi, id.hi, __ATOMIC_RELEASE);
        __atomic_store_n(&c.used, uint32_t{shm_slots::kInUse}, __ATOMIC_RELEASE);
        return &c;
    }
    return nullptr;
}

}  // namespace

UsageCount UsageTable::count(const unsigned char account_id[KA_ID_LEN],
                             const unsigned char key_id[KA_ID_LEN], UsageOutcome outcome,
                             uint64_t units, int64_t now_ms,
                             uint64_t now_ns, const RateLock &lock) noexcept {
    Header *h = header(this);
    UsageSlot *slots = slots_of(this);
    const uint64_t n = h->slots;
    const SlotId id = SlotId::of(key_id);

    UsageSlot *s = find(slots, n, id);
    // units alone are charged after an answer: they go with the call's slot
    if (s != nullptr && outcome != UsageOutcome::kUnitsOnly) s = static_cast<UsageSlot *>(split_at_hour(s, now_ms, lock));
    if (s == nullptr) {
        lock.lock(lock.data);
        s = find(slots, n, id);
        if (s == nullptr) s = claim(slots, n, id, account_id, outcome == UsageOutcome::kUnitsOnly ? 0 : now_ms);
        lock.unlock(lock.data);
    }
    if (s != nullptr) {
        add(*s, outcome, units, now_ms);
        return UsageCount{true, false};
    }
    __atomic_fetch_add(&h->drops, uint64_t{1}, __ATOMIC_RELAXED);
    uint64_t last = __atomic_load_n(&h->last_warn_ns, __ATOMIC_RELAXED);
    bool warn = (last == 0 || now_ns - last >= kWarnEveryNs) &&
                __atomic_compare_exchange_n(&h->last_warn_ns, &last, now_ns, false,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return UsageCount{false, warn};
}

// The first count of a key in a new UTC hour, while its slot still holds
// counts of an earlier one (the collector has not reached it yet: a large
// zone's walk takes seconds): that slot becomes a spill slot, kept with its
// counts and their last use until the collector takes and frees it, and the
// key is given a new slot for the new hour. Nothing is moved, so a
// collector taking the old slot at that moment takes its counts whole, with
// their hour; each hour's counts are filed in their own hour, as the quota
// ledger charges each call to the period of its own time. Under the lock,
// once per key and hour at most. With no free slot in the key's window the
// old slot goes on (its earlier counts are filed in the new hour): nothing
// is ever dropped for it. Returns the slot to count in, or null to look the
// key up again (another worker moved it meanwhile).
void *UsageTable::split_at_hour(void *slot, int64_t now_ms, const RateLock &lock) noexcept {
    UsageSlot *s = static_cast<UsageSlot *>(slot);
    const int64_t last = __atomic_load_n(&s->last_used_ms, __ATOMIC_ACQUIRE);
    if (last == 0 || last / kMsPerHour >= now_ms / kMsPerHour || !has_counts(*s)) return s;
    UsageSlot *slots = slots_of(this);
    const uint64_t n = header(this)->slots;
    const SlotId id{__atomic_load_n(&s->id_lo, __ATOMIC_ACQUIRE), __atomic_load_n(&s->id_hi, __ATOMIC_ACQUIRE)};
    lock.lock(lock.data);
    UsageSlot *to = nullptr;  // another worker split it first: look again
    if (shm_slots::matches(*s, id)) {
        unsigned char account[KA_ID_LEN];
        std::memcpy(account, s->account_id, KA_ID_LEN);
        to = claim(slots, n, id, account, now_ms);
        if (to != nullptr) __atomic_store_n(&s->used, uint32_t{shm_slots::kSpill}, __ATOMIC_RELEASE);
        else to = s;
    }
    lock.unlock(lock.data);
    return to;
}

bool UsageTable::take_spill(size_t i, UsageDelta &out, const RateLock &lock) noexcept {
    UsageSlot &s = slots_of(this)[i];
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) != shm_slots::kSpill) return false;
    lock.lock(lock.data);  // nothing changes hands meanwhile
    ids_of(s, out);
    const bool counted = exchange(s, out);
    // freed, not never used: keys probing past it still do (shm_slots.h)
    __atomic_store_n(&s.used, uint32_t{shm_slots::kFreed}, __ATOMIC_RELEASE);
    lock.unlock(lock.data);
    return counted;
}

// Without the lock: only a collector frees a slot, and two collectors run
// at once only while a reload overlaps the old worker 0's exit with the new
// one's timer; a slot freed and claimed again by another key in between
// could then hand a count to the wrong key (not seen in practice; noted in
// docs/RELIABILITY.md with the other races).
bool UsageTable::take(size_t i, UsageDelta &out) noexcept {
    UsageSlot &s = slots_of(this)[i];
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) != shm_slots::kInUse) return false;
    ids_of(s, out);
    return exchange(s, out);
}

bool UsageTable::free_if_idle(size_t i, int64_t before_ms, UsageDelta &out,
                              const RateLock &lock) noexcept {
    UsageSlot &s = slots_of(this)[i];
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) != shm_slots::kInUse ||
        __atomic_load_n(&s.last_used_ms, __ATOMIC_ACQUIRE) >= before_ms) {
        return false;
    }
    lock.lock(lock.data);
    bool freed = false, counted = false;
    if (__atomic_load_n(&s.used, __ATOMIC_ACQUIRE) == shm_slots::kInUse &&
        __atomic_load_n(&s.last_used_ms, __ATOMIC_ACQUIRE) < before_ms) {
        ids_of(s, out);
        // freed, not never used: the keys probing past it still do (shm_slots.h)
        __atomic_store_n(&s.used, uint32_t{shm_slots::kFreed}, __ATOMIC_RELEASE);
        freed = true;
        // a request that found the slot before it was freed may have counted
        // meanwhile: hand its count on rather than lose it
        counted = exchange(s, out);
    }
    lock.unlock(lock.data);
    return freed && counted;
}

void UsageTable::restore(const UsageDelta &d, const RateLock &lock) noexcept {
    Header *h = header(this);
    UsageSlot *slots = slots_of(this);
    lock.lock(lock.data);  // no slot is freed meanwhile
    UsageSlot *s = find(slots, h->slots, SlotId::of(d.key_id));
    if (s != nullptr) {
        __atomic_fetch_add(&s->allowed, d.allowed, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&s->rate_limited, d.rate_limited, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&s->quota_exceeded, static_cast<uint32_t>(d.quota_exceeded),
                           __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&s->units, d.units, __ATOMIC_ACQ_REL);
    } else {
        __atomic_fetch_add(&h->drops, d.allowed + d.rate_limited + d.quota_exceeded,
                           __ATOMIC_RELAXED);
    }
    lock.unlock(lock.data);
}

}  // namespace keyauth
