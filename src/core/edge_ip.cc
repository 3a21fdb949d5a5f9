// The IP lookup tool's answer, for the C API in keyauth_core.h.
#include <cstdio>

#include "ip_address.h"
#include "keyauth_core.h"

extern "C" size_t ka_ip_lookup_json(const char *text, size_t len, char *out, size_t out_len) {
    keyauth::IpInfo info;
    if (!keyauth::parse_ip(std::string_view(text, len), info)) return 0;
    // A valid address is at most 45 characters of [0-9A-Fa-f.:]: no escaping.
    int n = snprintf(out, out_len,
                     "{\"ip\":\"%.*s\",\"version\":%d,\"canonical\":\"%s\",\"type\":\"%s\","
                     "\"reverseDns\":\"%s\"}\n",
                     static_cast<int>(len), text, info.version, info.canonical, info.type,
                     info.reverse_dns);
    return n > 0 && static_cast<size_t>(n) < out_len ? static_cast<size_t>(n) : 0;
}
