// A webhook endpoint's URL (webhook create's --url, the admin API's "url"):
// never a crash; an accepted URL keeps the promises of webhook_url.h, and a
// refused one always says why.
#include <string>
#include <string_view>

#include "webhook_url.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::string error;
    const bool ok = keyauth::validate_webhook_url(in, error);
    if (ok != error.empty()) __builtin_trap();
    if (!ok) {
        if (error.compare(0, 4, "url ") != 0 && error.compare(0, 6, "url's ") != 0) __builtin_trap();
        return 0;
    }
    if (in.size() > keyauth::kMaxWebhookUrlBytes || in.size() < 9) __builtin_trap();
    if (in.find('#') != std::string_view::npos || in[8] == '/') __builtin_trap();
    for (char c : in) {
        if (c <= ' ' || c > '~') __builtin_trap();
    }
    return 0;
}
