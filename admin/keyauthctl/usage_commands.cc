// keyauthctl usage report: what each account (or one key) used, per UTC day
// or calendar month, for billing: CSV (RFC 4180) or JSON.
#include <memory>
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

// --from/--to: a UTC date, its day number.
uint32_t day_arg(const Args &a, const char *name) {
    const std::string v = a.need(name);
    auto ms = keyauth::parse_usage_instant(v);
    if (!ms || v.size() != 10) throw UsageError(std::string("--") + name + " must be a date, YYYY-MM-DD");
    return keyauth::period_of(Granularity::kDay, *ms);
}

// "2026-11-20" of a day number.
std::string day_label(uint32_t day) {
    return keyauth::format_time(keyauth::period_start_ms(Granularity::kDay, day)).substr(0, 10);
}

}  // namespace

void set_usage_source(std::unique_ptr<keyauth::UsageSource> source) { usage_source = std::move(source); }

int run_usage(keyauth::Store &store, const Args &a) {
    const uint32_t from = day_arg(a, "from"), last = day_arg(a, "to");
    if (last < from) throw UsageError("--to is before --from");
    keyauth::UsageReportQuery q;
    q.from_day = from;
    q.to_day = last + 1;
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
        print(true, json{{"from", day_label(from)}, {"to", day_label(last)}, {"by", by}, {"rows", out}}, "");
        return 0;
    }
    std::string csv = bom ? std::string(keyauth::kUtf8Bom) : "";
    csv += keyauth::usage_report_csv_header(q.key.has_value());
    for (const auto &r : rows) csv += keyauth::usage_report_csv_row(r);
    std::fwrite(csv.data(), 1, csv.size(), stdout);
    return 0;
}

}  // namespace keyauthctl
