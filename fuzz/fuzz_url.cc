// keyauthd's URL handling: percent-decoding and query parameters. Never a
// crash; a decoded string is never longer than its input.
#include <string>
#include <string_view>

#include "url.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::string out;
    if (keyauth::percent_decode(in, out, size & 1) && out.size() > in.size()) __builtin_trap();
    std::string value;
    for (const char *name : {"limit", "cursor", ""}) {
        if (keyauth::query_param(in, name, value) == keyauth::QueryParam::kFound &&
            value.size() > in.size()) {
            __builtin_trap();
        }
    }
    return 0;
}
