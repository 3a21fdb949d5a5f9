// The rate-limit half of the C API in keyauth_core.h.
#include <time.h>

#include <algorithm>

#include "gcra.h"
#include "keyauth_core.h"
#include "rate_table.h"
#include "usage_table.h"

using keyauth::ceil_seconds;
using keyauth::GcraParams;
using keyauth::RateTable;

extern "C" {

int ka_rate_table_format(void *mem, size_t size) { return RateTable::format(mem, size); }

int ka_rate_table_attach(void *mem, size_t size) { return RateTable::attach(mem, size) != nullptr; }

size_t ka_rate_table_slots(void *mem) { return static_cast<RateTable *>(mem)->slots(); }

uint64_t ka_rate_table_busy_evictions(void *mem) {
    return static_cast<RateTable *>(mem)->busy_evictions();
}

void ka_zone_prefetch(void *rate_table, void *usage_table, const ka_auth_result_t *key) {
    static_cast<const RateTable *>(rate_table)->prefetch(key->rate_id_bin);
    static_cast<const keyauth::UsageTable *>(usage_table)->prefetch(key->key_id_bin);
}

void ka_rate_check(void *table, const ka_auth_result_t *key, uint64_t now_ns, int share,
                   const ka_lock_t *lock, ka_rate_result_t *out) {
    uint32_t rate = std::min(key->requested_rpm, key->entitlement_rpm);
    GcraParams params = GcraParams::per_minute(rate);
    keyauth::RateLock l{lock->lock, lock->unlock, lock->data};
    keyauth::RateCheck c =
        static_cast<RateTable *>(table)->check(key->rate_id_bin, params, now_ns, l, share != 0);
    out->allowed = c.decision.allowed;
    out->limit = params.limit;
    out->remaining = c.decision.remaining;
    out->retry_after_s = std::max<uint64_t>(ceil_seconds(c.decision.retry_after_ns), 1);
    out->reset_s = ceil_seconds(c.decision.reset_ns);
    out->warn_full = c.warn;
}

void ka_rate_table_discard_spent(void *table) {
    static_cast<RateTable *>(table)->drain(
        [](void *, const unsigned char *, uint32_t, uint32_t) {}, nullptr);
}

uint64_t ka_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * keyauth::kNanosPerSecond +
           static_cast<uint64_t>(ts.tv_nsec);
}

}  // extern "C"
