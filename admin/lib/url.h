// The two pieces of URL handling keyauthd needs: percent-decoding of a path
// and finding one parameter of a query string. Both refuse what they cannot
// decode rather than guessing.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace keyauth {

// %XX sequences decoded; false on a bad or truncated escape or an encoded NUL.
// With plus_is_space (query values, as forms send them) '+' becomes ' '.
bool percent_decode(std::string_view in, std::string &out, bool plus_is_space = false);

enum class QueryParam { kAbsent, kFound, kBad };

// The value of the first `name=value` pair of `query` (the part after '?'),
// decoded. A pair without '=' has an empty value. kBad if it cannot be decoded.
QueryParam query_param(std::string_view query, std::string_view name, std::string &value);

// Every `name=value` pair of `query`, decoded, in order (repeats kept, so
// that a caller can refuse them); false if one cannot be decoded.
bool query_params(std::string_view query, std::vector<std::pair<std::string, std::string>> &out);

}  // namespace keyauth
