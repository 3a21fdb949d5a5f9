// Authorization header parsing for the Bearer scheme (RFC 6750 §2.1, with the
// scheme name case-insensitive as RFC 9110 §11.1 requires).
#pragma once

#include <string_view>

namespace keyauth {

enum class BearerParse {
    kMissing,    // no header, another scheme (Basic...), or "Bearer" with no token
    kFound,      // exactly one token; its format is checked separately
    kMalformed,  // Bearer with more than one token
};

// Never allocates; token points into header, and is meaningful only when
// kFound is returned.
BearerParse parse_bearer(std::string_view header, std::string_view &token) noexcept;

}  // namespace keyauth
