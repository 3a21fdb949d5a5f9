#include "redact.h"

#include <string_view>

#include "key_format.h"

namespace keyauth {
namespace {

bool is_base62(char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

}  // namespace

size_t redact_secrets(char *text, size_t len) noexcept {
    size_t masked = 0;
    std::string_view s(text, len);
    // Even glued to what precedes it ("Bearerka_..."): a false positive only
    // masks some log text, a miss would log a secret.
    for (size_t i = s.find("ka"); i != std::string_view::npos; i = s.find("ka", i + 1)) {
        size_t body = i + 2;
        if (body < len && s[body] == 'c') body++;
        if (body >= len || s[body] != '_') continue;
        body++;
        size_t end = body;
        while (end < len && is_base62(s[end])) end++;
        if (end - body < kRandomChars) continue;
        for (size_t k = i + kDisplayPrefixLen; k < end; k++) text[k] = '*';
        masked++;
        i = end - 1;
    }
    return masked;
}

}  // namespace keyauth
