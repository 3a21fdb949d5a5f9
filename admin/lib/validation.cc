#include "validation.h"

#include <set>

#include "keyauth_schema.h"
#include "scope.h"
#include "store_error.h"

namespace keyauth {
namespace {

[[noreturn]] void invalid(const char *field, const std::string &msg) {
    throw StoreError(StoreError::Kind::kInvalid, field, msg);
}

bool valid_utf8(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t n;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; }
        else return false;
        if (i + n >= s.size()) return false;
        for (size_t k = 1; k <= n; k++) {
            unsigned char d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xc0) != 0x80) return false;
            cp = cp << 6 | (d & 0x3f);
        }
        static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
        if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

}  // namespace

void validate_name(std::string_view name) { validate_label(name, "name", KA_NAME_MAX_LEN); }

void validate_label(std::string_view name, const char *field, size_t max_len) {
    const std::string f = field;
    if (name.empty()) invalid(field, f + " must not be empty");
    if (name.size() > max_len) invalid(field, f + " must be at most " + std::to_string(max_len) + " bytes");
    if (!valid_utf8(name)) invalid(field, f + " must be valid UTF-8");
    for (size_t i = 0; i < name.size(); i++) {
        auto c = static_cast<unsigned char>(name[i]);
        auto next = [&](size_t k) { return static_cast<unsigned char>(name[i + k]); };
        // C0 and DEL; C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F)
        if (c < 0x20 || c == 0x7f || (c == 0xc2 && next(1) <= 0x9f)) {
            invalid(field, f + " must not contain control characters");
        }
        // Bidi embeddings and overrides U+202A..U+202E (E2 80 AA..AE) and
        // isolates U+2066..U+2069 (E2 81 A6..A9): they make a name display
        // as another one in the console. The UTF-8 is valid, so the bytes
        // looked at exist.
        if (c == 0xe2 && ((next(1) == 0x80 && next(2) >= 0xaa && next(2) <= 0xae) ||
                          (next(1) == 0x81 && next(2) >= 0xa6 && next(2) <= 0xa9))) {
            invalid(field, f + " must not contain bidirectional control characters");
        }
    }
}

void validate_scopes(const std::vector<std::string> &scopes) {
    if (scopes.empty()) invalid("scopes", "scopes must name at least one scope");
    if (scopes.size() > KA_SCOPES_MAX)
        invalid("scopes", "at most " + std::to_string(KA_SCOPES_MAX) + " scopes");
    std::set<std::string_view> seen;
    for (const auto &s : scopes) {
        if (!scope_syntax_ok(s))
            invalid("scopes", "scope \"" + s.substr(0, KA_SCOPE_MAX_LEN) +
                                  "\" is not <resource>:<action> ([a-z0-9_.-]{1,31}, action may be *)");
        if (!seen.insert(s).second) invalid("scopes", "scope \"" + s + "\" is listed twice");
    }
}

void validate_rate(uint32_t rpm, const char *field) {
    if (rpm < 1 || rpm > kMaxRatePerMinute)
        invalid(field, std::string(field) + " must be an integer from 1 to " +
                           std::to_string(kMaxRatePerMinute));
}

void validate_catalog(const std::vector<PlanRecord> &plans) {
    if (plans.empty()) invalid("plans", "the catalog must hold at least one plan");
    if (plans.size() > 1000) invalid("plans", "the catalog may hold at most 1000 plans");
    std::set<std::string> ids;
    std::set<int32_t> orders;
    size_t popular = 0;
    for (size_t i = 0; i < plans.size(); i++) {
        const PlanRecord &p = plans[i];
        const std::string at = "plans[" + std::to_string(i) + "]";
        auto fail = [&](const std::string &field, const std::string &msg) {
            throw StoreError(StoreError::Kind::kInvalid, at + "." + field, at + "." + field + ": " + msg);
        };
        bool id_ok = !p.id.empty() && p.id.size() <= KA_PLAN_ID_MAX_LEN;
        for (char c : p.id) id_ok = id_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
        if (!id_ok) fail("id", "must be 1-64 characters of [a-z0-9-]");
        if (!ids.insert(p.id).second) fail("id", "\"" + p.id + "\" is used twice");
        try {
            validate_name(p.name);
        } catch (const StoreError &e) {
            fail("name", e.what());
        }
        if (p.price_paise == 0) fail("priceInr", "must be positive");
        if (p.price_paise > 10'000'000'000ULL * 100) fail("priceInr", "is too large");
        if (p.features.empty() || p.features.size() > KA_FEATURES_MAX)
            fail("features", "must hold 1 to " + std::to_string(KA_FEATURES_MAX) + " entries");
        for (const auto &f : p.features) {
            if (f.empty() || f.size() > KA_FEATURE_MAX_LEN || !valid_utf8(f))
                fail("features", "each feature must be 1-200 bytes of UTF-8");
        }
        if (!orders.insert(p.sort_order).second)
            fail("sortOrder", std::to_string(p.sort_order) + " is used twice");
        popular += p.popular ? 1 : 0;
        if ((p.states & KA_PLAN_STATES_RATE) && (p.rate_rpm < 1 || p.rate_rpm > kMaxRatePerMinute))
            fail("entitlements.rateLimitPerMinute", "must be an integer from 1 to " + std::to_string(kMaxRatePerMinute));
        if ((p.states & KA_PLAN_STATES_MAX_KEYS) && (p.max_keys < 1 || p.max_keys > KA_MAX_KEYS_LIMIT))
            fail("entitlements.maxKeys", "must be an integer from 1 to " + std::to_string(KA_MAX_KEYS_LIMIT));
        if (!quota_ok(p.quota, false) || (!(p.states & KA_PLAN_STATES_QUOTA) && !p.quota.none()))
            fail("entitlements.quota", "must be null or 1 to " + std::to_string(KA_QUOTA_UNITS_MAX) +
                                           " units a day or a month");
        if (p.states & ~(KA_PLAN_STATES_RATE | KA_PLAN_STATES_MAX_KEYS | KA_PLAN_STATES_QUOTA))
            fail("entitlements", "states unknown entitlements");
        if ((!(p.states & KA_PLAN_STATES_RATE) && p.rate_rpm) || (!(p.states & KA_PLAN_STATES_MAX_KEYS) && p.max_keys))
            fail("entitlements", "holds a value it does not state");
    }
    if (popular != 1)
        invalid("plans", "exactly one plan must be popular, not " + std::to_string(popular));
}

}  // namespace keyauth
