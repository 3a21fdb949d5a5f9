#include "catalog_json.h"

#include <set>

#include "money.h"
#include "quota_json.h"
#include "store.h"
#include "strict_json.h"

namespace keyauth {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string &field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, field + ": " + msg);
}

uint64_t price_of(const json &v, const std::string &field) {
    uint64_t paise = 0;
    if (v.is_number_unsigned()) {
        uint64_t inr = v.get<uint64_t>();
        if (inr == 0 || inr > kMaxPaise / kPaisePerInr) bad(field, "must be from 0.01 to 10000000000");
        return inr * kPaisePerInr;
    }
    if (v.is_string() && parse_inr(v.get<std::string>(), paise)) return paise;
    bad(field, "must be a positive integer, or a string with at most 2 decimals (\"4999.50\")");
}

uint32_t bounded_u32(const json &v, const std::string &field, uint32_t hi) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > hi)
        bad(field, "must be an integer from 1 to " + std::to_string(hi));
    return static_cast<uint32_t>(v.get<uint64_t>());
}

// "entitlements": {"rateLimitPerMinute", "maxKeys", "quota"}, each optional;
// a member given is stated by the plan (a null quota: stated unlimited).
void entitlements_of(const json &e, const std::string &at, PlanRecord &r) {
    if (!e.is_object())
        bad(at, "must be an object with any of rateLimitPerMinute, maxKeys, quota");
    for (auto it = e.begin(); it != e.end(); ++it) {
        if (it.key() != "rateLimitPerMinute" && it.key() != "maxKeys" && it.key() != "quota")
            bad(at + "." + it.key(), "unknown field (entitlements are rateLimitPerMinute, maxKeys, quota)");
    }
    if (e.contains("rateLimitPerMinute")) {
        r.rate_rpm = bounded_u32(e["rateLimitPerMinute"], at + ".rateLimitPerMinute", kMaxRatePerMinute);
        r.states |= KA_PLAN_STATES_RATE;
    }
    if (e.contains("maxKeys")) {
        r.max_keys = bounded_u32(e["maxKeys"], at + ".maxKeys", KA_MAX_KEYS_LIMIT);
        r.states |= KA_PLAN_STATES_MAX_KEYS;
    }
    if (e.contains("quota")) {
        try {
            r.quota = quota_from_json(e["quota"], QuotaOwner::kAccountOrPlan, at + ".quota");
        } catch (const StoreError &err) {
            bad(err.field(), std::string(err.what()).substr(err.field().size() + 1));
        }
        r.states |= KA_PLAN_STATES_QUOTA;
    }
}

}  // namespace

std::vector<PlanRecord> parse_catalog(std::string_view text) {
    std::string duplicate;
    json doc = parse_json_strict(text, duplicate);
    if (!duplicate.empty()) bad("catalog", "the member \"" + duplicate + "\" appears twice in one object");
    if (doc.is_discarded()) bad("catalog", "not valid JSON (or not UTF-8)");
    if (!doc.is_object() || !doc.contains("plans") || doc.size() != 1)
        bad("catalog", "expected an object with exactly one member, \"plans\"");
    const json &plans = doc["plans"];
    if (!plans.is_array()) bad("plans", "must be an array");
    static const std::set<std::string> kFields = {"id", "name", "priceInr", "features", "popular",
                                                  "sortOrder"};
    static const std::set<std::string> kOptional = {"entitlements"};
    std::vector<PlanRecord> out;
    for (size_t i = 0; i < plans.size(); i++) {
        const json &p = plans[i];
        const std::string at = "plans[" + std::to_string(i) + "]";
        if (!p.is_object()) bad(at, "must be an object");
        for (auto it = p.begin(); it != p.end(); ++it) {
            if (!kFields.count(it.key()) && !kOptional.count(it.key()))
                bad(at + "." + it.key(), "unknown field (priceUsd and exchangeRate are computed)");
        }
        for (const auto &f : kFields) {
            if (!p.contains(f)) bad(at + "." + f, "is missing");
        }
        PlanRecord r;
        if (!p["id"].is_string()) bad(at + ".id", "must be a string");
        r.id = p["id"].get<std::string>();
        if (!p["name"].is_string()) bad(at + ".name", "must be a string");
        r.name = p["name"].get<std::string>();
        r.price_paise = price_of(p["priceInr"], at + ".priceInr");
        if (!p["features"].is_array()) bad(at + ".features", "must be an array of strings");
        for (const auto &f : p["features"]) {
            if (!f.is_string()) bad(at + ".features", "must be an array of strings");
            r.features.push_back(f.get<std::string>());
        }
        if (!p["popular"].is_boolean()) bad(at + ".popular", "must be true or false");
        r.popular = p["popular"].get<bool>();
        const json &order = p["sortOrder"];
        if (!order.is_number_integer() ||
            (order.is_number_unsigned() ? order.get<uint64_t>() > INT32_MAX
                                        : order.get<int64_t>() < INT32_MIN))
            bad(at + ".sortOrder", "must be a 32-bit integer");
        r.sort_order = static_cast<int32_t>(order.get<int64_t>());
        if (p.contains("entitlements")) {
            try {
                entitlements_of(p["entitlements"], at + ".entitlements", r);
            } catch (const StoreError &err) {
                // named by its id as well as its place in the file
                throw StoreError(StoreError::Kind::kInvalid, err.field(),
                                 std::string(err.what()) + " (plan \"" + r.id.substr(0, 64) + "\")");
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

json plan_to_json(const PlanRecord &plan) {
    char inr[kMoneyTextMax];
    format_paise(plan.price_paise, inr);
    return {{"id", plan.id},           {"name", plan.name},       {"priceInr", inr},
            {"features", plan.features}, {"popular", plan.popular}, {"sortOrder", plan.sort_order},
            {"entitlements", entitlements_to_json(plan)}};
}

json entitlements_to_json(const PlanRecord &plan) {
    json e = json::object();
    if (plan.states & KA_PLAN_STATES_RATE) e["rateLimitPerMinute"] = plan.rate_rpm;
    if (plan.states & KA_PLAN_STATES_MAX_KEYS) e["maxKeys"] = plan.max_keys;
    if (plan.states & KA_PLAN_STATES_QUOTA) e["quota"] = quota_terms_json(plan.quota);
    return e;
}

bool add_retirement(std::string_view text, std::map<std::string, std::string> &retire, std::string &error) {
    const size_t eq = text.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == text.size() ||
        text.find('=', eq + 1) != std::string_view::npos) {
        error = "a retirement must be OLD=NEW, two plan ids";
        return false;
    }
    if (!retire.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))).second) {
        error = "a plan is retired twice";
        return false;
    }
    return true;
}

}  // namespace keyauth
