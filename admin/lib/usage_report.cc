#include "usage_report.h"

#include <algorithm>
#include <set>

#include "rfc3339.h"
#include "store_error.h"
#include "usage_series.h"

namespace keyauth {

std::optional<UsageReportArgError> read_usage_report_range(const std::string &from, const std::string &to,
                                                           const std::string &by, const char *flag,
                                                           UsageReportQuery &q) {
    const std::string f(flag);
    auto day = [&](const std::string &name, const std::string &v, uint32_t &out) -> std::optional<UsageReportArgError> {
        // a date as `to` includes that whole day, as GET /v1/usage reads it
        std::optional<int64_t> ms;
        if (is_usage_date(v)) ms = name == "to" ? parse_usage_to(v) : parse_usage_instant(v);
        if (!ms) return UsageReportArgError{name, f + name + " must be a date, YYYY-MM-DD"};
        out = period_of(Granularity::kDay, *ms);
        return std::nullopt;
    };
    if (auto bad = day("from", from, q.from_day)) return bad;
    if (auto bad = day("to", to, q.to_day)) return bad;
    if (q.to_day <= q.from_day) return UsageReportArgError{"to", f + "to is before " + f + "from"};
    if (q.to_day - q.from_day > kDefaultDayBucketsKept)
        return UsageReportArgError{"to", "at most 400 days from " + f + "from to " + f + "to"};
    if (by != "day" && by != "month") return UsageReportArgError{"by", f + "by must be day or month"};
    q.by_month = by == "month";
    return std::nullopt;
}

UsageReportRows::UsageReportRows(Store &store, UsageSource *source, const UsageReportQuery &q, size_t max_counts)
    : store_(store),
      source_(source),
      range_{Granularity::kDay, q.from_day, q.to_day},
      now_ms_(store.now()),
      account_(q.account),
      key_(q.key) {
    if (q.key) {
        auto found = store.find_key(*q.key);
        if (!found || (account_ && found->account_id != *account_))
            throw StoreError(StoreError::Kind::kNotFound, "key", "no key " + id_to_string(kKeyIdPrefix, *q.key));
        account_ = found->account_id;
        key_name_ = found->name;
    }
    if (account_ && !store.find_account(*account_))
        throw StoreError(StoreError::Kind::kNotFound, "account", "no account " + id_to_string(kAccountIdPrefix, *account_));

    // each day of the range to its billing period (a day, or its month)
    BillingPeriods periods = billing_periods(range_.from, range_.to, q.by_month);
    labels_ = std::move(periods.labels);
    of_day_ = std::move(periods.of_day);
    per_read_ = std::max<size_t>(1, max_counts / std::max<size_t>(1, labels_.size()));

    // The first read counts while the accounts fit, and only lists them
    // once they do not: every account with any use in the range, and the
    // one asked for even without.
    if (account_) counts_[*account_].resize(labels_.size());
    std::set<Id> listed;
    bool counting = true;
    if (source_ != nullptr) {
        reads_++;
        kept_buckets(*source_, range_, account_ ? &*account_ : nullptr, key_ ? &*key_ : nullptr, now_ms_,
                     [&](const BucketRow &row) {
                         if (counting && !counts_.count(row.account) && counts_.size() == per_read_) {
                             for (const auto &entry : counts_) listed.insert(entry.first);
                             counts_.clear();
                             counting = false;
                         }
                         if (!counting) {
                             listed.insert(row.account);
                             return;
                         }
                         auto &counts = counts_[row.account];
                         counts.resize(labels_.size());
                         counts[of_day_[row.period - range_.from]].add(row.counts);
                     });
    }
    accounts_.assign(listed.begin(), listed.end());
    if (!counting) count_next_accounts();
    at_ = counts_.begin();
}

void UsageReportRows::count_next_accounts() {
    counts_.clear();
    const size_t end = std::min(accounts_.size(), next_account_ + per_read_);
    for (size_t i = next_account_; i < end; i++) counts_[accounts_[i]].resize(labels_.size());
    next_account_ = end;
    if (counts_.empty()) return;
    const Id first = counts_.begin()->first, last = counts_.rbegin()->first;
    reads_++;
    kept_buckets(*source_, range_, nullptr, nullptr, now_ms_, [&](const BucketRow &row) {
        if (row.account < first || last < row.account) return;
        auto it = counts_.find(row.account);
        if (it != counts_.end()) it->second[of_day_[row.period - range_.from]].add(row.counts);
    });
}

bool UsageReportRows::next(std::vector<UsageReportRow> &out, size_t max) {
    out.clear();
    while (out.size() < max) {
        if (at_ == counts_.end()) {
            if (next_account_ >= accounts_.size()) break;
            count_next_accounts();
            at_ = counts_.begin();
            continue;
        }
        const auto &[acc, periods] = *at_;
        auto on_plan = store_.find_account_on_plan(acc);
        UsageReportRow base;
        base.account = acc;
        base.account_name = on_plan ? on_plan->account.record.name : "";
        base.plan_id = on_plan && on_plan->plan ? on_plan->plan->id : "";
        base.plan_name = on_plan && on_plan->plan ? on_plan->plan->name : "";
        base.key = key_;
        base.key_name = key_name_;
        for (size_t i = 0; i < periods.size(); i++) {
            UsageReportRow row = base;
            row.period = labels_[i];
            row.counts = periods[i];
            out.push_back(std::move(row));
        }
        ++at_;
    }
    return !out.empty();
}

std::vector<UsageReportRow> usage_report(Store &store, UsageSource *source, const UsageReportQuery &q) {
    UsageReportRows rows(store, source, q);
    std::vector<UsageReportRow> all, some;
    while (rows.next(some, 1024)) all.insert(all.end(), some.begin(), some.end());
    return all;
}

namespace {

// A piece is sent once it holds this much.
constexpr size_t kPieceBytes = 64 * 1024;

// "2026-11-20" of a day number.
std::string day_label(uint32_t day) {
    return format_time(period_start_ms(Granularity::kDay, day)).substr(0, 10);
}

}  // namespace

UsageReportText::UsageReportText(Store &store, UsageSource *source, const UsageReportQuery &q, Format format)
    : rows_(store, source, q), q_(q), format_(format) {}

bool UsageReportText::next(std::string &out) {
    out.clear();
    if (done_) return false;
    if (!started_) {
        started_ = true;
        if (format_ == Format::kJson) {
            nlohmann::json head{{"from", day_label(q_.from_day)},
                                {"to", day_label(q_.to_day - 1)},
                                {"by", q_.by_month ? "month" : "day"}};
            out = head.dump();
            out.back() = ',';  // the object goes on with its rows
            out += "\"rows\":[";
        } else {
            if (format_ == Format::kCsvWithBom) out = kUtf8Bom;
            out += usage_report_csv_header(q_.key.has_value());
        }
    }
    while (out.size() < kPieceBytes) {
        if (!rows_.next(batch_, 256)) {
            if (format_ == Format::kJson) out += "]}\n";
            done_ = true;
            break;
        }
        for (const auto &r : batch_) {
            if (format_ != Format::kJson) {
                out += usage_report_csv_row(r);
                continue;
            }
            if (!first_row_) out += ',';
            first_row_ = false;
            out += usage_report_json_row(r).dump();
        }
    }
    return true;
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
