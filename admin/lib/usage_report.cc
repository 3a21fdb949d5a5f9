#include "usage_report.h"

#include <map>

#include "store_error.h"
#include "usage_series.h"

namespace keyauth {

std::vector<UsageReportRow> usage_report(Store &store, UsageSource *source, const UsageReportQuery &q) {
    std::optional<Id> account = q.account;
    std::string key_name;
    if (q.key) {
        auto found = store.find_key(*q.key);
        if (!found || (account && found->account_id != *account))
            throw StoreError(StoreError::Kind::kNotFound, "key", "no key " + id_to_string(kKeyIdPrefix, *q.key));
        account = found->account_id;
        key_name = found->name;
    }
    if (account && !store.find_account(*account))
        throw StoreError(StoreError::Kind::kNotFound, "account", "no account " + id_to_string(kAccountIdPrefix, *account));

    // day by day, per account (or the one key): every account with any use
    // in the range, and the one asked for even without
    const UsageRange range{Granularity::kDay, q.from_day, q.to_day};
    std::map<Id, std::vector<BucketCounts>> days;
    if (account) days[*account].resize(range.size());
    if (source != nullptr) {
        kept_buckets(*source, range, account ? &*account : nullptr, q.key ? &*q.key : nullptr, store.now(),
                     [&](const BucketRow &row) {
                         auto &series = days[row.account];
                         series.resize(range.size());
                         series[row.period - range.from].add(row.counts);
                     });
    }

    std::vector<UsageReportRow> rows;
    for (const auto &[acc, series] : days) {
        auto on_plan = store.find_account_on_plan(acc);
        UsageReportRow base;
        base.account = acc;
        base.account_name = on_plan ? on_plan->account.record.name : "";
        base.plan_id = on_plan && on_plan->plan ? on_plan->plan->id : "";
        base.plan_name = on_plan && on_plan->plan ? on_plan->plan->name : "";
        base.key = q.key;
        base.key_name = key_name;
        for (auto &[label, counts] : usage_periods(range.from, series, q.by_month)) {
            UsageReportRow row = base;
            row.period = std::move(label);
            row.counts = counts;
            rows.push_back(std::move(row));
        }
    }
    return rows;
}

std::string usage_report_csv_header(bool per_key) {
    return std::string("period,accountId,accountName,planId,planName") + (per_key ? ",keyId,keyName" : "") +
           ",allowed,rateLimited,quotaExceeded,units\r\n";
}

std::string usage_report_csv_row(const UsageReportRow &r) {
    std::string line = r.period + "," + id_to_string(kAccountIdPrefix, r.account) + "," +
                       csv_field(r.account_name, true) + "," + csv_field(r.plan_id, true) + "," +
                       csv_field(r.plan_name, true);
    if (r.key) line += "," + id_to_string(kKeyIdPrefix, *r.key) + "," + csv_field(r.key_name, true);
    const BucketCounts &c = r.counts;
    return line + "," + std::to_string(c.allowed) + "," + std::to_string(c.rate_limited) + "," +
           std::to_string(c.quota_exceeded) + "," + std::to_string(c.units) + "\r\n";
}

nlohmann::json usage_report_json_row(const UsageReportRow &r) {
    using nlohmann::json;
    json row{{"period", r.period},
             {"accountId", id_to_string(kAccountIdPrefix, r.account)},
             {"accountName", r.account_name},
             {"planId", r.plan_id.empty() ? json(nullptr) : json(r.plan_id)},
             {"planName", r.plan_name.empty() ? json(nullptr) : json(r.plan_name)}};
    if (r.key) {
        row["keyId"] = id_to_string(kKeyIdPrefix, *r.key);
        row["keyName"] = r.key_name;
    }
    row.update(counts_json(r.counts));
    return row;
}

}  // namespace keyauth
