#include "usage_api.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>

#include "rfc3339.h"
#include "url.h"
#include "usage_series.h"

namespace keyauth {
namespace {

using nlohmann::json;

// The defaults: the last 48 hours, or the last 30 days, up to the end of the
// current one.
constexpr uint32_t kDefaultHours = 48;
constexpr uint32_t kDefaultDays = 30;

HttpResponse invalid(const std::string &field, const std::string &message) {
    return json_error(400, "VALIDATION_ERROR", message, field);
}

std::optional<HttpResponse> bad_instant(const std::string &field) {
    return invalid(field, field + " must be an RFC 3339 time (2026-11-20T09:00:00Z) or a date (2026-11-20)");
}

}  // namespace

HttpResponse usage_answer(Store &store, UsageSource *usage, const Id &account, const HttpRequest &req) {
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!query_params(req.query, pairs)) return invalid("query", "The query has a malformed %-escape");
    std::map<std::string, std::string> q;
    for (auto &[name, value] : pairs) {
        if (name != "granularity" && name != "from" && name != "to" && name != "keyId")
            return invalid(name, "Unknown query parameter \"" + name + "\"; expected granularity, from, to, keyId");
        if (!q.emplace(name, value).second) return invalid(name, name + " is given more than once");
    }

    Granularity g = Granularity::kDay;
    if (q.count("granularity")) {
        auto parsed = parse_granularity(q["granularity"]);
        if (!parsed) return invalid("granularity", "granularity must be hour or day");
        g = *parsed;
    }
    // from is rounded down, to up, to whole hours or days: the range covers
    // every instant asked for
    UsageRange range{g, 0, 0};
    const int64_t now = store.now();
    if (q.count("to")) {
        auto t = parse_usage_instant(q["to"]);
        if (!t) return *bad_instant("to");
        range.to = period_ceil(g, *t);
    } else {
        range.to = period_floor(g, now) + 1;
    }
    if (q.count("from")) {
        auto t = parse_usage_instant(q["from"]);
        if (!t) return *bad_instant("from");
        range.from = period_floor(g, *t);
    } else {
        const uint32_t span = g == Granularity::kHour ? kDefaultHours : kDefaultDays;
        range.from = range.to > span ? range.to - span : 0;
    }
    if (range.from >= range.to) return invalid("from", "from must be before to");
    if (range.size() > max_buckets(g)) {
        return invalid("to", g == Granularity::kHour
                                 ? "at most 168 hours (7 days) of hours: ask for days beyond that"
                                 : "at most 400 days of days");
    }

    std::optional<Id> key;
    if (q.count("keyId")) {
        Id id{};
        if (!parse_id(kKeyIdPrefix, q["keyId"], id)) return invalid("keyId", "keyId must be a key id (key_...)");
        // another account's key and a key that does not exist look the same
        auto found = store.find_key(id);
        if (!found || found->account_id != account) return json_error(404, "KEY_NOT_FOUND", "No such key");
        key = id;
    }

    std::vector<BucketCounts> series = usage
        ? usage_series(*usage, range, &account, key ? &*key : nullptr)
        : std::vector<BucketCounts>(range.size());
    json points = json::array();
    BucketCounts totals;
    for (size_t i = 0; i < series.size(); i++) {
        json p = counts_json(series[i]);
        p["start"] = format_time(period_start_ms(g, range.from + static_cast<uint32_t>(i)));
        points.push_back(std::move(p));
        totals.add(series[i]);
    }
    json body{{"granularity", granularity_name(g)},
              {"from", format_time(period_start_ms(g, range.from))},
              {"to", format_time(period_start_ms(g, range.to))},
              {"keyId", key ? json(id_to_string(kKeyIdPrefix, *key)) : json(nullptr)},
              {"series", std::move(points)},
              {"totals", counts_json(totals)}};
    HttpResponse r = json_response(200, body.dump());
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

}  // namespace keyauth
