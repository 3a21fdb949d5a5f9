// keyauthctl usage report: what each account (or one key) used, per UTC day
// or calendar month, for billing: CSV (RFC 4180) or JSON.
#include <map>
#include <memory>
#include <vector>

#include "command_support.h"
#include "commands.h"
#include "rfc3339.h"
#include "store_error.h"
#include "usage_series.h"

namespace keyauthctl {

using keyauth::BucketCounts;
using keyauth::Granularity;
using keyauth::csv_field;
using keyauth::Id;
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

struct Subject {
    Id account{};
    std::optional<Id> key;
};

}  // namespace

void set_usage_source(std::unique_ptr<keyauth::UsageSource> source) { usage_source = std::move(source); }

int run_usage(keyauth::Store &store, const Args &a) {
    const uint32_t from = day_arg(a, "from"), last = day_arg(a, "to");
    if (last < from) throw UsageError("--to is before --from");
    const keyauth::UsageRange range{Granularity::kDay, from, last + 1};
    if (range.size() > keyauth::kDefaultDayBucketsKept) throw UsageError("at most 400 days from --from to --to");
    const std::string by = a.need("by");
    if (by != "day" && by != "month") throw UsageError("--by must be day or month");
    const std::string format = a.opt("format").value_or(a.as_json ? "json" : "csv");
    if (format != "csv" && format != "json") throw UsageError("--format must be csv or json");

    std::optional<Id> account, key;
    if (auto v = a.opt("account")) account = parse_id_arg(keyauth::kAccountIdPrefix, *v, "--account");
    if (auto v = a.opt("key")) {
        key = parse_id_arg(keyauth::kKeyIdPrefix, *v, "--key");
        auto found = store.find_key(*key);
        if (!found || (account && found->account_id != *account))
            throw keyauth::StoreError(keyauth::StoreError::Kind::kNotFound, "key", "no key " + *v);
        account = found->account_id;
    }
    if (account && !store.find_account(*account))
        throw keyauth::StoreError(keyauth::StoreError::Kind::kNotFound, "account",
                                  "no account " + keyauth::id_to_string(keyauth::kAccountIdPrefix, *account));

    // day by day, per account (or the one key): every account with any use
    // in the range, and the one asked for even without
    std::map<Id, std::vector<BucketCounts>> days;
    if (account) days[*account].resize(range.size());
    if (usage_source) {
        usage_source->buckets(Granularity::kDay, range.from, range.to, account ? &*account : nullptr,
                              key ? &*key : nullptr, [&](const keyauth::BucketRow &row) {
                                  if (row.period < range.from || row.period >= range.to) return;
                                  auto &series = days[row.account];
                                  series.resize(range.size());
                                  series[row.period - range.from].add(row.counts);
                              });
    }

    const bool by_month = by == "month";
    const bool per_key = key.has_value();
    std::string csv = "period,accountId,accountName,planId,planName";
    csv += per_key ? ",keyId,keyName" : "";
    csv += ",allowed,rateLimited,quotaExceeded,units\r\n";
    json rows = json::array();
    const std::string key_text = key ? keyauth::id_to_string(keyauth::kKeyIdPrefix, *key) : "";
    const std::string key_name = key ? store.find_key(*key)->name : "";
    for (const auto &[acc, series] : days) {
        auto on_plan = store.find_account_on_plan(acc);
        const std::string acc_text = keyauth::id_to_string(keyauth::kAccountIdPrefix, acc);
        const std::string acc_name = on_plan ? on_plan->account.record.name : "";
        const std::string plan_id = on_plan && on_plan->plan ? on_plan->plan->id : "";
        const std::string plan_name = on_plan && on_plan->plan ? on_plan->plan->name : "";
        for (const auto &[label, c] : keyauth::usage_periods(range.from, series, by_month)) {
            json row{{"period", label},     {"accountId", acc_text}, {"accountName", acc_name},
                     {"planId", plan_id.empty() ? json(nullptr) : json(plan_id)},
                     {"planName", plan_name.empty() ? json(nullptr) : json(plan_name)}};
            if (per_key) {
                row["keyId"] = key_text;
                row["keyName"] = key_name;
            }
            row.update(keyauth::counts_json(c));
            rows.push_back(row);
            csv += label + "," + acc_text + "," + csv_field(acc_name, true) + "," + csv_field(plan_id, true) + "," +
                   csv_field(plan_name, true);
            if (per_key) csv += "," + key_text + "," + csv_field(key_name, true);
            csv += "," + std::to_string(c.allowed) + "," + std::to_string(c.rate_limited) + "," +
                   std::to_string(c.quota_exceeded) + "," + std::to_string(c.units) + "\r\n";
        }
    }
    if (format == "json") {
        print(true, json{{"from", day_label(from)}, {"to", day_label(last)}, {"by", by},
                         {"rows", rows}},
              "");
    } else {
        std::fwrite(csv.data(), 1, csv.size(), stdout);
    }
    return 0;
}

}  // namespace keyauthctl
