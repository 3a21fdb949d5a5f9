// The layout of the records that keyauthd and keyauthctl alone read
// (webhooks, leak reports): a u16 version, a u16 reserved, then a JSON
// object, like the audit trail. One place decides how they are framed.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keyauth {

std::string encode_json_record(uint16_t version, const nlohmann::json &body);
// The object, or none when the value is not `version`, is over max_json
// bytes of JSON, or is not a JSON object.
std::optional<nlohmann::json> decode_json_record(uint16_t version, std::string_view value, size_t max_json);

}  // namespace keyauth
