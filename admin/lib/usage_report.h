// The billing export (keyauthctl usage report; the admin API's report
// streams the same bytes): what each account, or one key, used per UTC day
// or calendar month, with the account's plan, as JSON rows or as CSV. The
// CSV's bytes are made here and nowhere else.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "store.h"
#include "usage_bucket.h"
#include "usage_series.h"
#include "usage_source.h"

namespace keyauth {

struct UsageReportQuery {
    uint32_t from_day = 0;  // days [from_day, to_day)
    uint32_t to_day = 0;
    bool by_month = false;
    std::optional<Id> account;  // every account with use when unset
    std::optional<Id> key;      // one key (of `account`, when given)
};

// The range and periods of a report as keyauthctl's --from --to --by and
// the admin API's ?from=&to=&by= give them: dates (YYYY-MM-DD, `to`
// included), at most 400 days, by "day" or "month". Fills q's from_day,
// to_day and by_month; else what is wrong, the names written with `flag`
// before them ("--" for the CLI).
struct UsageReportArgError {
    std::string field;
    std::string message;
};
std::optional<UsageReportArgError> read_usage_report_range(const std::string &from, const std::string &to,
                                                           const std::string &by, const char *flag,
                                                           UsageReportQuery &q);

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
//
// A piece at a time, in bounded memory: the counts of at most
// `max_counts` (account, billing period) pairs are held at once, 32 bytes
// each, never text. When the accounts with use need more, a first read of
// the usage lists them (16 bytes an account), and each later read counts
// the next accounts that fit: a month of 100,000 accounts by month is one
// read, by day a few. next() makes the rows in order, reading each
// account's name and plan as its rows are made.
class UsageReportRows {
public:
    static constexpr size_t kDefaultMaxCounts = 512 * 1024;  // 16 MiB of counts

    // Throws StoreError (see above), and kUnavailable when the usage cannot
    // be read.
    UsageReportRows(Store &store, UsageSource *source, const UsageReportQuery &q,
                    size_t max_counts = kDefaultMaxCounts);
    // The rows of the next accounts, at least `max` rows unless none are
    // left (an account's periods stay together), into `out` (cleared
    // first); false when there were none left. Throws as the constructor.
    bool next(std::vector<UsageReportRow> &out, size_t max);
    // How many times the usage was read so far (tests).
    size_t reads() const { return reads_; }

private:
    // Counts the accounts of accounts_ from next_account_ on that fit.
    void count_next_accounts();

    Store &store_;
    UsageSource *source_;
    UsageRange range_;
    int64_t now_ms_;
    std::optional<Id> account_, key_;
    std::string key_name_;
    std::vector<std::string> labels_;  // the billing periods, in order
    std::vector<uint32_t> of_day_;     // each day's label
    size_t per_read_;                  // accounts counted in one read
    std::vector<Id> accounts_;         // to report, in id order; empty: all counted in counts_
    size_t next_account_ = 0;
    std::map<Id, std::vector<BucketCounts>> counts_;  // per account: one per label
    std::map<Id, std::vector<BucketCounts>>::const_iterator at_;
    size_t reads_ = 0;
};

// Every row at once (tests, small reports).
std::vector<UsageReportRow> usage_report(Store &store, UsageSource *source, const UsageReportQuery &q);

// The report as keyauthctl usage report prints it and GET
// /v1/admin/usage/report sends it, about 64 KiB a piece: CSV (with the
// UTF-8 byte order mark first when asked) or JSON
// ({"from","to","by","rows":[...]}, from and to the first and last day).
// The same query gives the same bytes to both.
class UsageReportText {
public:
    enum class Format { kCsv, kCsvWithBom, kJson };
    // Throws as UsageReportRows does.
    UsageReportText(Store &store, UsageSource *source, const UsageReportQuery &q, Format format);
    // The next piece into `out` (cleared first); false after the last.
    // Throws StoreError when a stored record cannot be read.
    bool next(std::string &out);

private:
    UsageReportRows rows_;
    UsageReportQuery q_;
    Format format_;
    bool started_ = false, done_ = false, first_row_ = true;
    std::vector<UsageReportRow> batch_;
};

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
