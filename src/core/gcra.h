// GCRA (the generic cell rate algorithm, a.k.a. virtual scheduling): the
// whole state of a limiter is one theoretical arrival time (TAT).
//
// With a rate of N per minute the emission interval is T = 60 s / N and the
// burst tolerance tau = (burst - 1) * T. A request at time t is admitted iff
// max(TAT, t) - t <= tau, and then TAT becomes max(TAT, t) + T. So:
//   - steady state: exactly one request per T, i.e. N per minute;
//   - from idle, `burst` requests pass at once (burst = N by default);
//   - any 60-second window admits at most burst + N requests (2N by default);
//   - a state whose TAT <= now is indistinguishable from a fresh one, which is
//     what lets the table reuse idle slots without losing anything.
// Times are nanoseconds of a monotonic clock.
#pragma once

#include <cstdint>

namespace keyauth {

inline constexpr uint64_t kNanosPerMinute = 60'000'000'000ULL;
inline constexpr uint64_t kNanosPerSecond = 1'000'000'000ULL;

struct GcraParams {
    uint64_t interval_ns;   // T
    uint64_t tolerance_ns;  // tau
    uint32_t limit;         // requests per minute, for headers

    // rate_per_minute >= 1; burst 0 means "= rate_per_minute".
    static GcraParams per_minute(uint32_t rate_per_minute, uint32_t burst = 0) noexcept;
};

struct GcraDecision {
    bool allowed;
    uint64_t new_tat;        // to store if allowed
    uint32_t remaining;      // further requests admissible right now
    uint64_t retry_after_ns; // if refused: wait this long
    uint64_t reset_ns;       // until the full burst is available again
};

GcraDecision gcra_decide(uint64_t tat, uint64_t now, const GcraParams &p) noexcept;

// Whole seconds, rounded up (Retry-After, RateLimit t=).
inline uint64_t ceil_seconds(uint64_t ns) noexcept {
    return (ns + kNanosPerSecond - 1) / kNanosPerSecond;
}

}  // namespace keyauth
