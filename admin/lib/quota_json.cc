#include "quota_json.h"

#include <algorithm>
#include <charconv>

#include "quota_period.h"
#include "rfc3339.h"
#include "store_error.h"

namespace keyauth {
namespace {

[[noreturn]] void bad(const std::string &field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, field + " " + msg);
}

std::string units_rule() {
    return "an integer from 1 to " + std::to_string(KA_QUOTA_UNITS_MAX);
}

const char *periods_of(QuotaOwner owner) {
    return owner == QuotaOwner::kKey ? "\"day\", \"month\" or \"total\"" : "\"day\" or \"month\"";
}

// The period named, or KA_QUOTA_NONE if none is (or it is not the owner's).
uint8_t period_named(std::string_view name, QuotaOwner owner) {
    if (name == "day") return KA_QUOTA_DAY;
    if (name == "month") return KA_QUOTA_MONTH;
    if (name == "total" && owner == QuotaOwner::kKey) return KA_QUOTA_TOTAL;
    return KA_QUOTA_NONE;
}

}  // namespace

Quota quota_from_json(const nlohmann::json &v, QuotaOwner owner, const std::string &field) {
    if (v.is_null()) return Quota{};
    if (!v.is_object())
        bad(field, std::string("must be null or an object {\"units\": N, \"period\": ") + periods_of(owner) + "}");
    for (auto it = v.begin(); it != v.end(); ++it) {
        if (it.key() != "units" && it.key() != "period")
            bad(field + "." + it.key(), "is not a member of a quota (units, period)");
    }
    if (!v.contains("units")) bad(field + ".units", "is missing");
    if (!v.contains("period")) bad(field + ".period", "is missing");
    const nlohmann::json &units = v["units"];
    if (!units.is_number_unsigned() || units.get<uint64_t>() < 1 || units.get<uint64_t>() > KA_QUOTA_UNITS_MAX)
        bad(field + ".units", "must be " + units_rule());
    const nlohmann::json &period = v["period"];
    const uint8_t p = period.is_string() ? period_named(period.get<std::string>(), owner) : uint8_t(KA_QUOTA_NONE);
    if (p == KA_QUOTA_NONE) {
        if (period == "total")
            bad(field + ".period", std::string("must be ") + periods_of(owner) +
                                       ": total credits are for keys, not plans or accounts");
        bad(field + ".period", std::string("must be ") + periods_of(owner));
    }
    return Quota{p, units.get<uint64_t>()};
}

std::optional<Quota> quota_from_text(const std::string &text, QuotaOwner owner, std::string &why) {
    if (text == "none") return Quota{};
    const size_t slash = text.find('/');
    const std::string form = std::string("UNITS/day, UNITS/month") +
                             (owner == QuotaOwner::kKey ? ", UNITS/total" : "") + " or none";
    if (slash == std::string::npos) {
        why = "must be " + form;
        return std::nullopt;
    }
    const std::string units = text.substr(0, slash), period = text.substr(slash + 1);
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(units.data(), units.data() + units.size(), n);
    if (units.empty() || ec != std::errc() || p != units.data() + units.size() || n < 1 ||
        n > KA_QUOTA_UNITS_MAX) {
        why = "units must be " + units_rule() + " (" + form + ")";
        return std::nullopt;
    }
    const uint8_t kind = period_named(period, owner);
    if (kind == KA_QUOTA_NONE) {
        why = period == "total" ? "total credits are for keys; an account's quota is " + form
                                : "the period must be " + std::string(periods_of(owner)) + " (" + form + ")";
        return std::nullopt;
    }
    return Quota{kind, n};
}

nlohmann::json quota_terms_json(const Quota &q) {
    if (q.none()) return nullptr;
    return {{"units", q.units}, {"period", quota_period_name(q.period)}};
}

std::optional<uint64_t> quota_used_of(QuotaUsageSource *source, QuotaSubject subject, const Id &id,
                                      const Quota &q, int64_t now_ms) noexcept {
    if (source == nullptr || q.none()) return 0;
    try {
        return source->used(subject, id, q.period, now_ms);
    } catch (...) {
        return std::nullopt;
    }
}

nlohmann::json quota_to_json(const Quota &q, std::optional<uint64_t> used, int64_t now_ms) {
    if (q.none()) return nullptr;
    const int64_t end = quota_period_end_ms(q.period, now_ms);
    // units are below 2^48 and a sum of uses is bounded: clamp, never wrap
    const uint64_t u = used ? std::min<uint64_t>(*used, uint64_t(INT64_MAX) / 2) : 0;
    const nlohmann::json remaining = used ? nlohmann::json(static_cast<int64_t>(q.units) - static_cast<int64_t>(u))
                                          : nlohmann::json(nullptr);
    return {{"units", q.units},
            {"period", quota_period_name(q.period)},
            {"used", used ? nlohmann::json(*used) : nlohmann::json(nullptr)},
            {"remaining", remaining},
            {"resetsAt", end < 0 ? nlohmann::json(nullptr) : nlohmann::json(format_time(end))}};
}

}  // namespace keyauth
