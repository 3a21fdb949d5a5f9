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

HttpResponse invalid(const std::string &field, const std::string &message) {
    return json_error(400, "VALIDATION_ERROR", message, field);
}

// account: the one whose usage is asked (null: all, admin only); admin:
// ?accountId= is a known parameter.
HttpResponse answer(Store &store, UsageSource *usage, const Id *account, const HttpRequest &req, bool admin) {
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!query_params(req.query, pairs)) return invalid("query", "The query has a malformed %-escape");
    std::map<std::string, std::string> q;
    for (auto &[name, value] : pairs) {
        if (name.empty()) {
            if (value.empty()) continue;  // a stray '&' ("a=1&&b=2", "a=1&")
            return invalid("query", "A query parameter without a name");
        }
        if (name != "granularity" && name != "from" && name != "to" && name != "keyId" &&
            !(admin && name == "accountId"))
            return invalid(name, std::string("Unknown query parameter \"") + name +
                                     "\"; expected granularity, from, to, keyId" + (admin ? ", accountId" : ""));
        if (!q.emplace(name, value).second) return invalid(name, name + " is given more than once");
    }

    auto given = [&](const char *name) {
        auto it = q.find(name);
        return it == q.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
    const UsageRangeAnswer asked = parse_usage_range(given("granularity"), given("from"), given("to"), store.now());
    if (!asked.field.empty()) return invalid(asked.field, asked.message);
    const UsageRange range = asked.range;
    const Granularity g = range.granularity;

    Id asked_account{};
    if (q.count("accountId")) {
        if (!parse_id(kAccountIdPrefix, q["accountId"], asked_account))
            return invalid("accountId", "accountId must be an account id (acc_...)");
        if (!store.find_account(asked_account)) return json_error(404, "ACCOUNT_NOT_FOUND", "No such account");
        account = &asked_account;
    }
    std::optional<Id> key;
    if (q.count("keyId")) {
        Id id{};
        if (!parse_id(kKeyIdPrefix, q["keyId"], id)) return invalid("keyId", "keyId must be a key id (key_...)");
        // another account's key and a key that does not exist look the same
        auto found = store.find_key(id);
        if (!found || (account && found->account_id != *account))
            return json_error(404, "KEY_NOT_FOUND", "No such key");
        key = id;
        asked_account = found->account_id;
        account = &asked_account;
    }

    std::vector<BucketCounts> series = usage
        ? usage_series(*usage, range, account, key ? &*key : nullptr, store.now())
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
    if (admin) body["accountId"] = account ? json(id_to_string(kAccountIdPrefix, *account)) : json(nullptr);
    HttpResponse r = json_response(200, body.dump());
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

}  // namespace

HttpResponse usage_answer(Store &store, UsageSource *usage, const Id &account, const HttpRequest &req) {
    return answer(store, usage, &account, req, false);
}

HttpResponse admin_usage_answer(Store &store, UsageSource *usage, const HttpRequest &req) {
    return answer(store, usage, nullptr, req, true);
}

}  // namespace keyauth
