// allowedIps and meta of keys and accounts as the APIs, keyauthctl and the
// audit trail speak of them (DESIGN, *Restrictions and metadata*).
// allowedIps: null (any address) or an array of 1 to 32 CIDRs, normalized on
// write (src/core/ip_allowlist.h); the records hold them packed. meta: null
// (none) or a JSON object, kept as its compact text (members in name order)
// of at most 1 KiB, handed on and never interpreted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace keyauth {

// CIDR texts → the packed list; kInvalid naming `field` for a bad entry
// (host bits set: "10.1.2.3/8" is refused, never widened), none or > 32.
std::string allowed_ips_from_texts(const std::vector<std::string> &texts, const char *field);
// The API's value: null → "" (any address), or an array of strings.
std::string allowed_ips_from_json(const nlohmann::json &value, const char *field);
// null for "" (any address), else the canonical texts.
nlohmann::json allowed_ips_to_json(std::string_view packed);

// null → "" (none); an object → its compact text; anything else, or a text
// over KA_META_MAX_BYTES, kInvalid naming `field`.
std::string meta_from_json(const nlohmann::json &value, const char *field);
// null for "" (none), else the object.
nlohmann::json meta_to_json(std::string_view stored);

}  // namespace keyauth
