// IP address parsing and classification for the IP lookup tool
// (GET /v1/ip/{ip_address}). The path segment is untrusted input, so the
// parser is strict and allocation-free: it accepts only the textual forms of
// RFC 4291 §2.2 and the dotted quad, and writes every output into IpInfo.
#pragma once

#include <string_view>

namespace keyauth {

struct IpInfo {
    int version;              // 4 or 6
    unsigned char bytes[16];  // network order; v4 uses the first 4
    char canonical[46];       // NUL-terminated: dotted quad for v4; RFC 5952 text for v6
    const char *type;         // static string from the IANA special-purpose registries
    char reverse_dns[74];     // NUL-terminated PTR name, no trailing dot
};

// Strict parse of the text exactly as given: no percent-decoding, whitespace,
// zone id, brackets or prefix length; at most 45 characters. IPv4 is exactly
// four decimal octets without leading zeros (so "010" is never read as
// octal). Returns false for anything else; out is then zeroed, with type null
// and empty strings, so a caller that ignores the result prints nothing.
bool parse_ip(std::string_view text, IpInfo &out) noexcept;

}  // namespace keyauth
