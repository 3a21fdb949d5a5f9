// The IP lookup path segment: parse, and the canonical form must parse back
// to the same address; the JSON answer must fit its buffer.
#include <cstring>

#include "ip_address.h"
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
    return 0;
}
