#include "terminal_text.h"

#include <cstdint>
#include <cstdio>

namespace keyauthctl {
namespace {

bool disarmed(uint32_t cp) {
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

// The code point of the UTF-8 sequence at s[i] and its length, or length 0
// when it is not valid UTF-8 (overlong, a surrogate, beyond U+10FFFF, cut).
size_t decode(std::string_view s, size_t i, uint32_t &cp) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    if (c < 0x80) {
        cp = c;
        return 1;
    }
    if ((c & 0xe0) == 0xc0) n = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) n = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) n = 4, cp = c & 0x07;
    else return 0;
    if (i + n > s.size()) return 0;
    for (size_t k = 1; k < n; k++) {
        const auto d = static_cast<unsigned char>(s[i + k]);
        if ((d & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (d & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    char esc[8];
    for (size_t i = 0; i < text.size();) {
        uint32_t cp = 0;
        const size_t n = decode(text, i, cp);
        if (n == 0) {
            std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned char>(text[i]));
            out += esc;
            i++;
            continue;
        }
        if (disarmed(cp)) {
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(cp));
            out += esc;
        } else {
            out.append(text, i, n);
        }
        i += n;
    }
    return out;
}

}  // namespace keyauthctl
