// The body of a keyauth_verify request (DESIGN's *Verify API*):
//   {"key": string, "scopes"?: [string], "cost"?: 0..KA_QUOTA_MAX_COST,
//    "ip"?: "IPv4 or IPv6 address"}
// The body is untrusted and the parser runs on the request path, so it is
// strict and allocation-free: the key and the scopes are views into the body
// (none of their valid values needs a JSON escape, so an escaped one is
// refused rather than decoded), the scopes a bounded array, the ip an
// address ready for ka_edge_check_key. Anything else (another field, a field
// twice, a wrong type, trailing bytes) is refused naming the field.
#pragma once

#include <string_view>

#include "keyauth_core.h"

namespace keyauth {

// True when body is a well-formed request; out is filled. Otherwise false,
// with out->field naming the field at fault ("body" for the whole) and
// out->error saying why (ASCII without quotes or backslashes, and never a
// byte of the key).
bool parse_verify_request(std::string_view body, ka_verify_request_t &out) noexcept;

}  // namespace keyauth
