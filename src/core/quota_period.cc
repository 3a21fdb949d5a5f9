#include "quota_period.h"

namespace keyauth {
namespace {

constexpr int64_t kMsPerDay = 86400000;

// Days since 1970-01-01 of a proleptic Gregorian date, and back (Howard
// Hinnant's civil calendar algorithms).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

void civil_from_days(int64_t z, int64_t &y, unsigned &m) noexcept {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const unsigned doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    m = mp < 10 ? mp + 3 : mp - 9;
    y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2);
}

int64_t day_of(int64_t now_ms) noexcept {
    if (now_ms < 0) return 0;
    return now_ms / kMsPerDay;
}

// The first day of the month holding `day`, and of the month after it.
void month_bounds(int64_t day, int64_t &first, int64_t &next, int64_t &index) noexcept {
    int64_t y;
    unsigned m;
    civil_from_days(day, y, m);
    first = days_from_civil(y, m, 1);
    next = m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, m + 1, 1);
    index = (y - 1970) * 12 + (m - 1);
}

}  // namespace

uint16_t quota_period_tag(uint8_t period, int64_t now_ms) noexcept {
    const int64_t day = day_of(now_ms);
    int64_t index = 0;
    if (period == KA_QUOTA_DAY) {
        index = day;
    } else if (period == KA_QUOTA_MONTH) {
        int64_t first, next;
        month_bounds(day, first, next, index);
    } else if (period != KA_QUOTA_TOTAL) {
        return 0;
    }
    return static_cast<uint16_t>((static_cast<unsigned>(period) << 14) |
                                 static_cast<unsigned>(index & 0x3fff));
}

int64_t quota_period_end_ms(uint8_t period, int64_t now_ms) noexcept {
    const int64_t day = day_of(now_ms);
    if (period == KA_QUOTA_DAY) return (day + 1) * kMsPerDay;
    if (period == KA_QUOTA_MONTH) {
        int64_t first, next, index;
        month_bounds(day, first, next, index);
        return next * kMsPerDay;
    }
    return -1;
}

int64_t quota_period_seconds(uint8_t period, int64_t now_ms) noexcept {
    if (period == KA_QUOTA_DAY) return 86400;
    if (period == KA_QUOTA_MONTH) {
        int64_t first, next, index;
        month_bounds(day_of(now_ms), first, next, index);
        return (next - first) * 86400;
    }
    return 0;
}

const char *quota_period_name(uint8_t period) noexcept {
    switch (period) {
        case KA_QUOTA_DAY: return "day";
        case KA_QUOTA_MONTH: return "month";
        case KA_QUOTA_TOTAL: return "total";
        default: return "none";
    }
}

}  // namespace keyauth
