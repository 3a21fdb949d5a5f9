// Test support (unit tests and fuzzers): every byte of s as a %XX escape.
#pragma once

#include <string>

namespace keyauth::testing {

inline std::string percent_encoded(const std::string &s, bool lower_hex = false) {
    static const char upper[] = "0123456789ABCDEF", lower[] = "0123456789abcdef";
    const char *digits = lower_hex ? lower : upper;
    std::string out;
    for (unsigned char c : s) {
        out += '%';
        out += digits[c >> 4];
        out += digits[c & 15];
    }
    return out;
}

}  // namespace keyauth::testing
