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

}  // namespace keyauth
