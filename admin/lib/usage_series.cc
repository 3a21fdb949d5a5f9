#include "usage_series.h"

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

std::optional<int64_t> parse_usage_instant(std::string_view text) {
    // a date alone is that day's 00:00 UTC; the parser checks the calendar
    if (text.size() == 10) {
        for (size_t i = 0; i < text.size(); i++) {
            const bool dash = i == 4 || i == 7;
            if (dash ? text[i] != '-' : !std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
        }
        return parse_time(std::string(text) + "T00:00:00Z");
    }
    return parse_time(text);
}

uint32_t period_floor(Granularity g, int64_t ms) { return period_of(g, ms); }

uint32_t period_ceil(Granularity g, int64_t ms) {
    const uint32_t p = period_of(g, ms);
    return period_start_ms(g, p) == ms ? p : p + 1;
}

std::vector<BucketCounts> usage_series(UsageSource &source, const UsageRange &range, const Id *account,
                                       const Id *key) {
    std::vector<BucketCounts> series(range.size());
    if (series.empty()) return series;
    source.buckets(range.granularity, range.from, range.to, account, key, [&](const BucketRow &row) {
        if (row.period >= range.from && row.period < range.to) series[row.period - range.from].add(row.counts);
    });
    return series;
}

nlohmann::json counts_json(const BucketCounts &c) {
    return {{"allowed", c.allowed},
            {"rateLimited", c.rate_limited},
            {"quotaExceeded", c.quota_exceeded},
            {"units", c.units}};
}

std::vector<UsagePeriod> usage_periods(uint32_t from_day, const std::vector<BucketCounts> &days, bool by_month) {
    std::vector<UsagePeriod> periods;
    for (size_t i = 0; i < days.size(); i++) {
        const int64_t ms = period_start_ms(Granularity::kDay, from_day + static_cast<uint32_t>(i));
        std::string label = format_time(ms).substr(0, by_month ? 7 : 10);
        if (periods.empty() || periods.back().label != label) periods.push_back({std::move(label), {}});
        periods.back().counts.add(days[i]);
    }
    return periods;
}

std::string csv_field(std::string_view value, bool text) {
    std::string v(value);
    if (text && !v.empty() &&
        (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@' || v[0] == '\t' || v[0] == '\r'))
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
