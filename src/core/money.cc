#include "money.h"

namespace keyauth {
namespace {

__extension__ typedef unsigned __int128 u128;  // GCC/Clang; not in ISO C++

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Shared strict decimal grammar: int_part ['.' frac_part], int_part is "0" or
// starts with 1-9, frac_part has 1..max_frac digits. The value scaled by
// 10^max_frac must be in (0, max_scaled]. Digits are accumulated only while
// the integer part is at most max_int_digits long, so the 1 KB-of-digits
// case is rejected by length before any arithmetic could overflow.
bool parse_fixed(std::string_view text, size_t max_frac, size_t max_int_digits,
                 uint64_t max_scaled, uint64_t &out) noexcept {
    size_t i = 0;
    uint64_t value = 0;
    while (i < text.size() && is_digit(text[i])) {
        if (i == max_int_digits) return false;
        value = value * 10 + static_cast<uint64_t>(text[i] - '0');
        i++;
    }
    size_t int_digits = i;
    if (int_digits == 0) return false;                       // "", ".5", "-1", " 83"
    if (int_digits > 1 && text[0] == '0') return false;      // "01", "00.5"
    size_t frac_digits = 0;
    if (i < text.size()) {
        if (text[i] != '.') return false;                    // "1,000", "1e3", "83 "
        i++;
        while (i < text.size() && is_digit(text[i])) {
            if (frac_digits == max_frac) return false;       // "83.1234567"
            value = value * 10 + static_cast<uint64_t>(text[i] - '0');
            frac_digits++;
            i++;
        }
        if (frac_digits == 0) return false;                  // "5."
        if (i != text.size()) return false;                  // "5.5x", "5.5 "
    }
    for (; frac_digits < max_frac; frac_digits++) value *= 10;
    if (value == 0 || value > max_scaled) return false;
    out = value;
    return true;
}

// Decimal digits of v, most significant first; returns the count.
size_t put_uint(uint64_t v, char *out) noexcept {
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t k = 0; k < n; k++) out[k] = tmp[n - 1 - k];
    return n;
}

// v / 100 with exactly two decimals: the rendering of paise and of cents.
size_t format_hundredths(uint64_t v, char *out) noexcept {
    size_t n = put_uint(v / 100, out);
    uint64_t frac = v % 100;
    out[n++] = '.';
    out[n++] = static_cast<char>('0' + frac / 10);
    out[n++] = static_cast<char>('0' + frac % 10);
    out[n] = '\0';
    return n;
}

}  // namespace

// 1,000,000 has 7 integer digits; 6 fraction digits.
bool parse_rate(std::string_view text, uint64_t &micro) noexcept {
    return parse_fixed(text, 6, 7, kMaxRateMicro, micro);
}

size_t format_rate(uint64_t micro, char *out) noexcept {
    size_t n = put_uint(micro / kMicroPerUnit, out);
    uint64_t frac = micro % kMicroPerUnit;
    if (frac != 0) {
        size_t width = 6;
        while (frac % 10 == 0) {  // canonical form: drop trailing zeros
            frac /= 10;
            width--;
        }
        out[n++] = '.';
        for (size_t k = width; k-- > 0;) {
            out[n + k] = static_cast<char>('0' + frac % 10);
            frac /= 10;
        }
        n += width;
    }
    out[n] = '\0';
    return n;
}

// 10,000,000,000 has 11 integer digits; 2 fraction digits.
bool parse_inr(std::string_view text, uint64_t &paise) noexcept {
    return parse_fixed(text, 2, 11, kMaxPaise, paise);
}

size_t format_paise(uint64_t paise, char *out) noexcept {
    return format_hundredths(paise, out);
}

// paise / 100 INR divided by micro / 10^6 INR-per-USD, times 100 cents:
// the two factors of 100 cancel, leaving paise * 10^6 / micro. With
// paise < 2^64 the numerator stays below 2^84, far inside 128 bits.
uint64_t usd_cents(uint64_t paise, uint64_t micro) noexcept {
    if (micro == 0) return UINT64_MAX;
    u128 num = static_cast<u128>(paise) * kMicroPerUnit;
    u128 q = num / micro;
    u128 r = num % micro;
    if (r >= micro - r) q++;  // half-up: 2r >= micro without overflow
    if (q > UINT64_MAX) return UINT64_MAX;
    return static_cast<uint64_t>(q);
}

size_t format_cents(uint64_t cents, char *out) noexcept {
    return format_hundredths(cents, out);
}

}  // namespace keyauth
