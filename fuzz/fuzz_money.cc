// Exchange rates and INR prices typed by operators: parse, format, parse back.
#include <cstring>
#include <string_view>

#include "money.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    uint64_t micro = 0, back = 0, paise = 0;
    char buf[kMoneyTextMax];
    if (parse_rate(text, micro)) {
        size_t n = format_rate(micro, buf);
        if (!parse_rate(std::string_view(buf, n), back) || back != micro) __builtin_trap();
        usd_cents(1, micro);
        usd_cents(kMaxPaise, micro);
    }
    if (parse_inr(text, paise)) {
        size_t n = format_paise(paise, buf);
        if (!parse_inr(std::string_view(buf, n), back) || back != paise) __builtin_trap();
        format_cents(usd_cents(paise, 1), buf);
    }
    return 0;
}
