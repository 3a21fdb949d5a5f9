// Calendar UTC periods of quotas: a day from 00:00, a month from the 1st,
// 00:00; total credits never refill. Pure arithmetic on Unix time, shared by
// the edge (what a request is charged to) and keyauthd (resetsAt).
#pragma once

#include <cstdint>

#include "keyauth_schema.h"

namespace keyauth {

// The period that holds now_ms, as a 16-bit tag: the period kind in the top
// 2 bits, the day (or month) number since 1970 in the low 14 (so a tag
// repeats only after 44 years of days, 1,365 of months). TOTAL: kind only.
uint16_t quota_period_tag(uint8_t period, int64_t now_ms) noexcept;

// The Unix ms at which the period holding now_ms ends (the next one starts),
// or -1 for TOTAL and NONE.
int64_t quota_period_end_ms(uint8_t period, int64_t now_ms) noexcept;

// The length in seconds of the period holding now_ms (a month: 28 to 31
// days), or 0 for TOTAL and NONE: the window of its RateLimit-Policy.
int64_t quota_period_seconds(uint8_t period, int64_t now_ms) noexcept;

// "day", "month", "total" (and "none"): the JSON and CLI names.
const char *quota_period_name(uint8_t period) noexcept;

// The periods holding "now", computed once a second: a worker asks for them
// on every call under a quota, and a month's calendar arithmetic is not free.
class PeriodClock {
public:
    struct Period {
        uint16_t tag = 0;
        int64_t end_ms = -1;
        int64_t seconds = 0;
    };
    const Period &at(uint8_t period, int64_t now_ms) noexcept {
        const int64_t sec = now_ms / 1000;
        if (sec != sec_) {
            for (uint8_t p = KA_QUOTA_DAY; p <= KA_QUOTA_TOTAL; p++) {
                periods_[p] = Period{quota_period_tag(p, now_ms), quota_period_end_ms(p, now_ms),
                                     quota_period_seconds(p, now_ms)};
            }
            sec_ = sec;
        }
        return periods_[period <= KA_QUOTA_TOTAL ? period : 0];
    }

private:
    int64_t sec_ = -1;
    Period periods_[KA_QUOTA_TOTAL + 1];
};

}  // namespace keyauth
