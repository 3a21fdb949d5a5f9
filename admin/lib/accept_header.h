// The Accept request header (RFC 9110 12.5.1), as far as a handler that
// can answer in a few media types needs it: how much the client wants one.
#pragma once

#include <string_view>

namespace keyauth {

// The q the header gives `type` ("text/csv"): the highest of the ranges
// that match it (the type itself, "text/*", "*/*"), 0 when none does or its
// q is 0 or malformed, 1 when there is no header at all (anything goes).
double accept_quality(std::string_view accept, std::string_view type);

}  // namespace keyauth
