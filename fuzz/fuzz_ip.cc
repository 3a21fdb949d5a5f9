// The IP lookup path segment: parse, and the canonical form must parse back
// to the same address; the JSON answer must fit its buffer. The same bytes
// as an allowedIps CIDR (issue 48): one that parses prints canonically and
// parses back to the same entry, holds no host bit, and fits its own network.
#include <cstring>

#include "ip_address.h"
#include "ip_allowlist.h"
#include "keyauth_core.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    keyauth::IpInfo info, again;
    if (keyauth::parse_ip(text, info)) {
        if (!keyauth::parse_ip(info.canonical, again) ||
            std::memcmp(info.bytes, again.bytes, 16) != 0 || info.version != again.version) {
            __builtin_trap();
        }
    }
    char out[KA_IP_JSON_MAX];
    ka_ip_lookup_json(text.data(), text.size(), out, sizeof out);

    unsigned char entry[keyauth::kCidrEntryBytes], back[keyauth::kCidrEntryBytes];
    if (keyauth::parse_cidr(text, entry) == keyauth::CidrParse::kOk) {
        const std::string canonical = keyauth::cidr_text(entry);
        const std::string_view packed(reinterpret_cast<const char *>(entry), sizeof entry);
        if (keyauth::parse_cidr(canonical, back) != keyauth::CidrParse::kOk ||
            std::memcmp(entry, back, sizeof entry) != 0 || !keyauth::allowed_ips_ok(packed) ||
            !keyauth::allowed_ips_fit(packed, entry)) {
            __builtin_trap();
        }
    }
    return 0;
}
