// JSON parsing that refuses a member name repeated within one object:
// nlohmann::json keeps the last of the two silently, and which one a client
// or an operator's file meant is unknown.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace keyauth {

// Like json::parse(text, nullptr, false): a discarded value when the text is
// not JSON. When a name repeats (at any depth), `duplicate` is set to the
// first such name, whatever the rest of the text holds. When the text is
// not JSON and `broken` is given, it is set to the name of the top-level
// member whose value was being read (a `meta` with a byte that is not
// UTF-8), or emptied when the fault lies elsewhere, so that a 400 can name
// the field.
nlohmann::json parse_json_strict(std::string_view text, std::string &duplicate, std::string *broken = nullptr);

}  // namespace keyauth
