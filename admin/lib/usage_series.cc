#include "usage_series.h"

#include <algorithm>
#include <cctype>

#include "rfc3339.h"

namespace keyauth {

uint32_t max_buckets(Granularity g) {
    return g == Granularity::kHour ? kHourBucketsKept : kDefaultDayBucketsKept;
}

const char *granularity_name(Granularity g) { return g == Granularity::kHour ? "hour" : "day"; }

std::optional<Granularity> parse_granularity(std::string_view text) {
    if (text == "hour") return Granularity::kHour;
    if (text == "day") return Granularity::kDay;
    return std::nullopt;
}

bool is_usage_date(std::string_view text) {
    if (text.size() != 10) return false;
    for (size_t i = 0; i < text.size(); i++) {
        const bool dash = i == 4 || i == 7;
        if (dash ? text[i] != '-' : !std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    }
    return true;
}

std::optional<int64_t> parse_usage_instant(std::string_view text) {
    // a date alone is that day's 00:00 UTC; the parser checks the calendar
    if (text.size() == 10) return is_usage_date(text) ? parse_time(std::string(text) + "T00:00:00Z") : std::nullopt;
    return parse_time(text);
}

std::optional<int64_t> parse_usage_to(std::string_view text) {
    std::optional<int64_t> ms = parse_usage_instant(text);
    if (ms && is_usage_date(text)) *ms += kMsPerDay;
    return ms;
}

uint32_t period_floor(Granularity g, int64_t ms) { return period_of(g, ms); }

uint32_t period_ceil(Granularity g, int64_t ms) {
    const uint32_t p = period_of(g, ms);
    return period_start_ms(g, p) == ms ? p : p + 1;
}

namespace {

// 10000-01-01T00:00:00Z: RFC 3339 has four digits for the year.
constexpr int64_t kYear10000Ms = 253402300800000;

UsageRangeAnswer refused(std::string field, std::string message) {
    return UsageRangeAnswer{UsageRange{}, std::move(field), std::move(message)};
}

UsageRangeAnswer bad_instant(const std::string &field) {
    return refused(field, field + " must be an RFC 3339 time (2026-11-20T09:00:00Z) or a date (2026-11-20), "
                                  "from 1970 on");
}

}  // namespace

UsageRangeAnswer parse_usage_range(const std::optional<std::string> &granularity,
                                   const std::optional<std::string> &from, const std::optional<std::string> &to,
                                   int64_t now_ms) {
    Granularity g = Granularity::kDay;
    if (granularity) {
        auto parsed = parse_granularity(*granularity);
        if (!parsed) return refused("granularity", "granularity must be hour or day");
        g = *parsed;
    }
    std::optional<int64_t> from_ms, to_ms;
    if (from && !(from_ms = parse_usage_instant(*from))) return bad_instant("from");
    if (to && !(to_ms = parse_usage_to(*to))) return bad_instant("to");
    if ((from_ms && *from_ms >= kYear10000Ms) || (to_ms && *to_ms >= kYear10000Ms))
        return refused(from_ms && *from_ms >= kYear10000Ms ? "from" : "to", "the range must end before the year 10000");

    UsageRange range{g, 0, 0};
    range.to = to_ms ? period_ceil(g, *to_ms) : period_floor(g, now_ms) + 1;
    if (period_start_ms(g, range.to) >= kYear10000Ms) return refused("to", "the range must end before the year 10000");
    if (from_ms) {
        range.from = period_floor(g, *from_ms);
        if (range.from >= range.to) return refused("from", "from must be before to");
    } else {
        // the default span ends at to; to placed it, so to is named
        const uint32_t span = g == Granularity::kHour ? kDefaultUsageHours : kDefaultUsageDays;
        if (range.to < span)
            return refused("to", g == Granularity::kHour ? "without from, to must leave 48 hours after 1970-01-01"
                                                         : "without from, to must leave 30 days after 1970-01-01");
        range.from = range.to - span;
    }
    if (range.size() > max_buckets(g)) {
        // the one given names the range: to if given, else from
        return refused(to ? "to" : "from", g == Granularity::kHour
                                               ? "at most 168 hours (7 days) of hours: ask for days beyond that"
                                               : "at most 400 days of days");
    }
    return UsageRangeAnswer{range, "", ""};
}

void kept_buckets(UsageSource &source, const UsageRange &range, const Id *account, const Id *key, int64_t now_ms,
                  const BucketSink &each) {
    if (range.size() == 0) return;
    const uint32_t days = range.granularity == Granularity::kDay ? source.days_kept() : 0;
    const uint32_t from = std::max(range.from, first_kept_period(range.granularity, now_ms, days));
    if (from >= range.to) return;
    source.buckets(range.granularity, from, range.to, account, key, [&](const BucketRow &row) {
        if (row.period >= from && row.period < range.to) each(row);
    });
}

std::vector<BucketCounts> usage_series(UsageSource &source, const UsageRange &range, const Id *account,
                                       const Id *key, int64_t now_ms) {
    std::vector<BucketCounts> series(range.size());
    kept_buckets(source, range, account, key, now_ms,
                 [&](const BucketRow &row) { series[row.period - range.from].add(row.counts); });
    return series;
}

nlohmann::json counts_json(const BucketCounts &c) {
    return {{"allowed", c.allowed},
            {"rateLimited", c.rate_limited},
            {"quotaExceeded", c.quota_exceeded},
            {"units", c.units}};
}

BillingPeriods billing_periods(uint32_t from_day, uint32_t to_day, bool by_month) {
    BillingPeriods p;
    for (uint32_t day = from_day; day < to_day; day++) {
        std::string label = format_time(period_start_ms(Granularity::kDay, day)).substr(0, by_month ? 7 : 10);
        if (p.labels.empty() || p.labels.back() != label) p.labels.push_back(std::move(label));
        p.of_day.push_back(static_cast<uint32_t>(p.labels.size() - 1));
    }
    return p;
}

std::string csv_field(std::string_view value, bool text) {
    std::string v(value);
    if (text && !v.empty() &&
        (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == ';' || v[0] == '\t' ||
         v[0] == '\r'))
        v.insert(v.begin(), '\'');
    if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
    std::string quoted = "\"";
    for (char c : v) {
        if (c == '"') quoted += '"';
        quoted += c;
    }
    return quoted + "\"";
}

}  // namespace keyauth
