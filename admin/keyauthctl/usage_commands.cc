// keyauthctl usage report: what each account (or one key) used, per UTC day
// or calendar month, for billing: CSV (RFC 4180) or JSON.
#include <memory>
#include <optional>
#include <vector>

#include "command_support.h"
#include "commands.h"
#include "rfc3339.h"
#include "usage_report.h"
#include "usage_series.h"

namespace keyauthctl {

using keyauth::Granularity;
using nlohmann::json;

namespace {

std::unique_ptr<keyauth::UsageSource> usage_source;

// --from DATE: its day number; --to DATE: the day after it, where the
// range ends (a date as to includes that whole day, as GET /v1/usage reads
// it: parse_usage_to).
uint32_t date_arg(const Args &a, const char *name) {
    const std::string v = a.need(name);
    std::optional<int64_t> ms;
    if (keyauth::is_usage_date(v))
        ms = std::string(name) == "to" ? keyauth::parse_usage_to(v) : keyauth::parse_usage_instant(v);
    if (!ms) throw UsageError(std::string("--") + name + " must be a date, YYYY-MM-DD");
    return keyauth::period_of(Granularity::kDay, *ms);
}

// "2026-11-20" of a day number.
std::string day_label(uint32_t day) {
    return keyauth::format_time(keyauth::period_start_ms(Granularity::kDay, day)).substr(0, 10);
}

}  // namespace

void set_usage_source(std::unique_ptr<keyauth::UsageSource> source) { usage_source = std::move(source); }

int run_usage(keyauth::Store &store, const Args &a) {
    keyauth::UsageReportQuery q;
    q.from_day = date_arg(a, "from");
    q.to_day = date_arg(a, "to");
    if (q.to_day <= q.from_day) throw UsageError("--to is before --from");
    if (q.to_day - q.from_day > keyauth::kDefaultDayBucketsKept) throw UsageError("at most 400 days from --from to --to");
    const std::string by = a.need("by");
    if (by != "day" && by != "month") throw UsageError("--by must be day or month");
    q.by_month = by == "month";
    const std::string format = a.opt("format").value_or(a.as_json ? "json" : "csv");
    if (format != "csv" && format != "json") throw UsageError("--format must be csv or json");
    const bool bom = a.opt("bom").has_value();
    if (bom && format != "csv") throw UsageError("--bom is for --format csv");
    if (auto v = a.opt("account")) q.account = parse_id_arg(keyauth::kAccountIdPrefix, *v, "--account");
    if (auto v = a.opt("key")) q.key = parse_id_arg(keyauth::kKeyIdPrefix, *v, "--key");

    const std::vector<keyauth::UsageReportRow> rows = keyauth::usage_report(store, usage_source.get(), q);
    if (format == "json") {
        json out = json::array();
        for (const auto &r : rows) out.push_back(keyauth::usage_report_json_row(r));
        print(true, json{{"from", day_label(q.from_day)}, {"to", day_label(q.to_day - 1)}, {"by", by}, {"rows", out}},
              "");
        return 0;
    }
    std::string csv = bom ? std::string(keyauth::kUtf8Bom) : "";
    csv += keyauth::usage_report_csv_header(q.key.has_value());
    for (const auto &r : rows) csv += keyauth::usage_report_csv_row(r);
    std::fwrite(csv.data(), 1, csv.size(), stdout);
    return 0;
}

}  // namespace keyauthctl
