// keyauthctl usage report: what each account (or one key) used, per UTC day
// or calendar month, for billing: CSV (RFC 4180) or JSON.
#include <memory>
#include <optional>
#include <vector>

#include "command_support.h"
#include "commands.h"
#include "usage_report.h"

namespace keyauthctl {

namespace {

std::unique_ptr<keyauth::UsageSource> usage_source;

}  // namespace

void set_usage_source(std::unique_ptr<keyauth::UsageSource> source) { usage_source = std::move(source); }

int run_usage(keyauth::Store &store, const Args &a) {
    keyauth::UsageReportQuery q;
    if (auto bad = keyauth::read_usage_report_range(a.need("from"), a.need("to"), a.need("by"), "--", q))
        throw UsageError(bad->message);
    const std::string format = a.opt("format").value_or(a.as_json ? "json" : "csv");
    if (format != "csv" && format != "json") throw UsageError("--format must be csv or json");
    const bool bom = a.opt("bom").has_value();
    if (bom && format != "csv") throw UsageError("--bom is for --format csv");
    if (auto v = a.opt("account")) q.account = parse_id_arg(keyauth::kAccountIdPrefix, *v, "--account");
    if (auto v = a.opt("key")) q.key = parse_id_arg(keyauth::kKeyIdPrefix, *v, "--key");

    using Format = keyauth::UsageReportText::Format;
    keyauth::UsageReportText text(store, usage_source.get(), q,
                                  format == "json" ? Format::kJson : bom ? Format::kCsvWithBom : Format::kCsv);
    std::string piece;
    while (text.next(piece)) std::fwrite(piece.data(), 1, piece.size(), stdout);
    return 0;
}

}  // namespace keyauthctl
