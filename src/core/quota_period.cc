#include "quota_period.h"

#include "civil_date.h"

namespace keyauth {
namespace {

constexpr int64_t kMsPerDay = 86400000;

int64_t day_of(int64_t now_ms) noexcept {
    if (now_ms < 0) return 0;
    return now_ms / kMsPerDay;
}

// The first day of the month holding `day`, and of the month after it.
void month_bounds(int64_t day, int64_t &first, int64_t &next, int64_t &index) noexcept {
    int64_t y;
    unsigned m, d;
    civil_from_days(day, y, m, d);
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
