#include "scope.h"

#include "keyauth_schema.h"

namespace keyauth {
namespace {

constexpr size_t kPartMax = 31;

bool part_ok(std::string_view part) {
    if (part.empty() || part.size() > kPartMax) {
        return false;
    }
    for (char c : part) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
                  c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

}  // namespace

bool scope_syntax_ok(std::string_view scope) noexcept {
    static_assert(2 * kPartMax + 1 <= KA_SCOPE_MAX_LEN, "scope fits the record bound");
    size_t colon = scope.find(':');
    if (colon == std::string_view::npos) {
        return false;
    }
    std::string_view resource = scope.substr(0, colon);
    std::string_view action = scope.substr(colon + 1);
    return part_ok(resource) && (action == "*" || part_ok(action));
}

bool scope_grants(std::string_view granted, std::string_view required) noexcept {
    if (granted == required) {
        return true;
    }
    size_t colon = granted.find(':');
    return colon != std::string_view::npos && granted.substr(colon) == ":*" &&
           required.size() > colon + 1 && required.substr(0, colon + 1) == granted.substr(0, colon + 1);
}

}  // namespace keyauth
