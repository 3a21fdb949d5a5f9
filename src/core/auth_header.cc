#include "auth_header.h"

#include <cstring>

namespace keyauth {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

const char *skip_spaces(const char *p, const char *end) {
    while (p < end && is_space(*p)) p++;
    return p;
}

// "bearer" in any case: the bytes OR 0x20 (lower-case letters stay, upper
// ones fold; no other byte folds onto a letter of "bearer").
bool is_bearer(const char *p) {
    constexpr char kScheme[] = "bearer";
    for (int i = 0; i < 6; i++) {
        if ((p[i] | 0x20) != kScheme[i]) return false;
    }
    return true;
}

}  // namespace

BearerParse parse_bearer(std::string_view header, std::string_view &token) noexcept {
    token = {};
    const char *p = header.data();
    const char *const end = p + header.size();
    p = skip_spaces(p, end);
    // "Bearer" and at least one blank, or "Bearer" alone (no token).
    if (end - p < 6 || !is_bearer(p) || (end - p > 6 && !is_space(p[6]))) {
        return BearerParse::kMissing;
    }
    p = skip_spaces(p + 6, end);
    // The token runs to the last non-blank; a blank inside it means more
    // than one token. memchr rather than a loop: this runs on every request.
    const char *last = end;
    while (last > p && is_space(last[-1])) last--;
    if (last == p) return BearerParse::kMissing;
    const size_t len = static_cast<size_t>(last - p);
    token = std::string_view(p, len);
    // The token's characters are the format check's business (and nginx has
    // already refused CR, LF and NUL in header values).
    return std::memchr(p, ' ', len) == nullptr && std::memchr(p, '\t', len) == nullptr
               ? BearerParse::kFound
               : BearerParse::kMalformed;
}

}  // namespace keyauth
