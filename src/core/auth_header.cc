#include "auth_header.h"

namespace keyauth {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

bool iequals_ascii(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (size_t i = 0; i < a.size(); i++) {
        char x = a[i];
        if (x >= 'A' && x <= 'Z') {
            x = static_cast<char>(x - 'A' + 'a');
        }
        if (x != b[i]) {
            return false;
        }
    }
    return true;
}

}  // namespace

BearerParse parse_bearer(std::string_view header, std::string_view &token) noexcept {
    token = {};
    size_t i = 0;
    const size_t n = header.size();
    while (i < n && is_space(header[i])) i++;
    // "Bearer" and at least one blank, or "Bearer" alone (no token).
    constexpr std::string_view kScheme = "bearer";
    if (n - i < kScheme.size() || !iequals_ascii(header.substr(i, kScheme.size()), kScheme) ||
        (n - i > kScheme.size() && !is_space(header[i + kScheme.size()]))) {
        return BearerParse::kMissing;
    }
    i += kScheme.size();
    while (i < n && is_space(header[i])) i++;
    size_t start = i;
    while (i < n && !is_space(header[i])) i++;
    if (i == start) return BearerParse::kMissing;
    token = header.substr(start, i - start);
    while (i < n && is_space(header[i])) i++;
    // The token's characters are the format check's business (and nginx has
    // already refused CR, LF and NUL in header values).
    return i == n ? BearerParse::kFound : BearerParse::kMalformed;
}

}  // namespace keyauth
