#include "gcra.h"

#include <algorithm>

namespace keyauth {

GcraParams GcraParams::per_minute(uint32_t rate_per_minute, uint32_t burst) noexcept {
    uint32_t rate = std::max<uint32_t>(rate_per_minute, 1);
    uint32_t b = burst == 0 ? rate : burst;
    uint64_t interval = kNanosPerMinute / rate;
    return GcraParams{interval, (static_cast<uint64_t>(b) - 1) * interval, rate};
}

GcraDecision gcra_decide(uint64_t tat, uint64_t now, const GcraParams &p) noexcept {
    uint64_t base = std::max(tat, now);
    uint64_t debt = base - now;
    if (debt > p.tolerance_ns) {
        return GcraDecision{false, tat, 0, debt - p.tolerance_ns, debt};
    }
    uint64_t remaining = (p.tolerance_ns - debt) / p.interval_ns;
    return GcraDecision{true, base + p.interval_ns,
                        static_cast<uint32_t>(std::min<uint64_t>(remaining, UINT32_MAX)), 0,
                        debt + p.interval_ns};
}

}  // namespace keyauth
