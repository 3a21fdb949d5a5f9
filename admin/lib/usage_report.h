// The billing export (keyauthctl usage report; the admin API's report
// streams the same bytes): what each account, or one key, used per UTC day
// or calendar month, with the account's plan, as JSON rows or as CSV. The
// CSV's bytes are made here and nowhere else.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "store.h"
#include "usage_bucket.h"
#include "usage_source.h"

namespace keyauth {

struct UsageReportQuery {
    uint32_t from_day = 0;  // days [from_day, to_day)
    uint32_t to_day = 0;
    bool by_month = false;
    std::optional<Id> account;  // every account with use when unset
    std::optional<Id> key;      // one key (of `account`, when given)
};

struct UsageReportRow {
    std::string period;  // "2026-11-20" or "2026-11"
    Id account{};
    std::string account_name, plan_id, plan_name;  // empty: none
    std::optional<Id> key;
    std::string key_name;
    BucketCounts counts;
};

// The rows, per account (in id order) then period: every account with any
// use in the range, and the one asked for even without. An unknown account
// or key, or a key of another account than the one asked for, throws
// StoreError kNotFound. No source: zeros.
std::vector<UsageReportRow> usage_report(Store &store, UsageSource *source, const UsageReportQuery &q);

// The UTF-8 byte order mark: Excel on Windows reads a CSV without it in the
// system's code page, and shows every non-ASCII name garbled.
inline constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// RFC 4180 with CRLF: the header row (keyId, keyName when per_key), then
// one line a row. Stored text goes through csv_field (usage_series.h).
std::string usage_report_csv_header(bool per_key);
std::string usage_report_csv_row(const UsageReportRow &row);

// {"period","accountId","accountName","planId","planName"[,"keyId","keyName"],
//  "allowed","rateLimited","quotaExceeded","units"}; no plan: nulls.
nlohmann::json usage_report_json_row(const UsageReportRow &row);

}  // namespace keyauth
