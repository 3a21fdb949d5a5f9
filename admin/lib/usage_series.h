// Usage over time as its readers show it (GET /v1/usage, keyauthctl usage
// report): a range of whole UTC hours or days, the edges' buckets summed
// into a zero-filled series, and the four counts' JSON names.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "usage_bucket.h"
#include "usage_source.h"

namespace keyauth {

// Periods [from, to) of one granularity.
struct UsageRange {
    Granularity granularity = Granularity::kDay;
    uint32_t from = 0;
    uint32_t to = 0;
    size_t size() const { return to > from ? to - from : 0; }
};

// The widest range one read may ask for: the hours kept (7 days) and the
// days kept by default (400).
uint32_t max_buckets(Granularity g);

// "hour" / "day".
const char *granularity_name(Granularity g);
std::optional<Granularity> parse_granularity(std::string_view text);

// An instant as the API and the CLI take it: RFC 3339 (Z or an offset) or a
// UTC date, YYYY-MM-DD (its 00:00). Nullopt for anything else.
std::optional<int64_t> parse_usage_instant(std::string_view text);

// True for a date alone (YYYY-MM-DD), the form a bound names a whole day in.
bool is_usage_date(std::string_view text);

// Where a range given as `to` ends, exclusive, as GET /v1/usage, keyauthctl
// usage report and the console all read it: an instant is a half-open
// bound (itself); a date includes that whole UTC day (the next day's
// 00:00: to=2026-11-30 is November's last day). Nullopt as for
// parse_usage_instant.
std::optional<int64_t> parse_usage_to(std::string_view text);

// The period holding `ms`, and the first period that starts at or after it.
uint32_t period_floor(Granularity g, int64_t ms);
uint32_t period_ceil(Granularity g, int64_t ms);

// GET /v1/usage's range from its parameters (nullopt: not given): the
// granularity (default day); `from` rounded down and `to` (parse_usage_to)
// up to whole periods, so that the range covers every instant asked for;
// without `to`, the end of the current period (now_ms); without `from`, the
// 48 hours or 30 days ending at `to` (refused, naming `to`, if they would
// start before 1970). At most max_buckets(g) periods, ending before the
// year 10000. On a refusal, `field` names the parameter and the range is
// empty.
struct UsageRangeAnswer {
    UsageRange range;
    std::string field;  // empty: the range is good
    std::string message;
};
constexpr uint32_t kDefaultUsageHours = 48;
constexpr uint32_t kDefaultUsageDays = 30;
UsageRangeAnswer parse_usage_range(const std::optional<std::string> &granularity,
                                   const std::optional<std::string> &from, const std::optional<std::string> &to,
                                   int64_t now_ms);

// source.buckets() of the range's periods still kept at now_ms
// (first_kept_period, with the source's days_kept()): an older bucket an
// idle edge, or etcd between two age-outs, still holds is never handed out.
void kept_buckets(UsageSource &source, const UsageRange &range, const Id *account, const Id *key, int64_t now_ms,
                  const BucketSink &each);

// The range's series: one BucketCounts per period, in order, zeros where no
// edge counted anything or the period is no longer kept at now_ms; the
// buckets of `account` (all when null) and `key` (all of the account's when
// null), every edge's added up.
std::vector<BucketCounts> usage_series(UsageSource &source, const UsageRange &range, const Id *account,
                                       const Id *key, int64_t now_ms);

// {"allowed","rateLimited","quotaExceeded","units"}
nlohmann::json counts_json(const BucketCounts &c);

// The billing periods of keyauthctl usage report over days [from_day,
// to_day): a UTC day ("2026-11-20") or a calendar month ("2026-11") each,
// in order (a month's days within the range only: a range from the 15th
// has a first month of the 15th on), and the period each day falls in.
struct BillingPeriods {
    std::vector<std::string> labels;
    std::vector<uint32_t> of_day;  // of_day[i]: the label of day from_day + i
};
BillingPeriods billing_periods(uint32_t from_day, uint32_t to_day, bool by_month);

// One CSV field as RFC 4180 writes it: quoted when it holds a comma, a
// double quote, CR or LF, its quotes doubled. `text`: a value that a
// spreadsheet would take for a formula or split (OWASP's CSV injection
// list: =, +, -, @, tab or CR first; and ;, the list separator where a
// comma is the decimal mark) gets a leading apostrophe, so that a stored
// name is shown, never run.
std::string csv_field(std::string_view value, bool text);

}  // namespace keyauth
