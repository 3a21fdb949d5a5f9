// Authorization header -> Bearer token -> key format check, and log redaction:
// the bytes every request brings before anything is looked up.
#include <cstring>
#include <string>

#include "auth_header.h"
#include "key_format.h"
#include "redact.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view header(reinterpret_cast<const char *>(data), size);
    std::string_view token;
    keyauth::BearerParse r = keyauth::parse_bearer(header, token);
    if (r == keyauth::BearerParse::kFound) {
        // the token is a slice of the header
        if (token.empty() || token.data() < header.data() ||
            token.data() + token.size() > header.data() + header.size()) {
            __builtin_trap();
        }
        keyauth::secret_format_ok(token, keyauth::kKeyPrefix);
        keyauth::secret_format_ok(token, keyauth::kConsoleTokenPrefix);
    }
    std::string copy(header);
    keyauth::redact_secrets(copy.data(), copy.size());
    if (copy.size() != size) __builtin_trap();  // masking never changes the length
    return 0;
}
