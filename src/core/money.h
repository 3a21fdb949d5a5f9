// Exact decimal money for the plan catalog. Prices are INR held as integer
// paise (1 INR = 100 paise); the exchange rate "INR per 1 USD" is held in
// millionths (83.123456 -> 83123456). USD prices are whole cents. Everything
// is integer arithmetic: binary floating point cannot represent 0.01 or most
// rates, and a catalog price must not change with the compiler or the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace keyauth {

inline constexpr uint64_t kMicroPerUnit = 1'000'000;            // rate scale
inline constexpr uint64_t kPaisePerInr = 100;
inline constexpr uint64_t kMaxRateMicro = 1'000'000 * kMicroPerUnit;  // 1,000,000 INR/USD
inline constexpr uint64_t kMaxPaise = 10'000'000'000ULL * kPaisePerInr;  // 10^10 INR

// Buffer sizes that hold any uint64_t input plus a terminating NUL.
inline constexpr size_t kRateTextMax = 24;
inline constexpr size_t kMoneyTextMax = 32;

// A rate in millionths of an INR per USD (83.123456 -> 83123456).
// Strict parse: digits, optional '.', 1-6 fraction digits; no sign, no
// exponent, no spaces, no leading '.', no trailing '.', leading zeros only as
// "0.x"; value > 0 and <= 1,000,000.000000. Returns false otherwise (micro is
// then left unchanged).
bool parse_rate(std::string_view text, uint64_t &micro) noexcept;

// Canonical text of a rate: no trailing fractional zeros, no '.' if integral
// ("83.5", "84", "83.123456"). Writes a NUL-terminated string into out (at
// least kRateTextMax bytes), returns its length without the NUL.
size_t format_rate(uint64_t micro, char *out) noexcept;

// Strict parse of a price in INR with at most 2 decimals ("4999", "4999.5",
// "4999.50", "0.01"): same lexical rules as parse_rate, > 0 and
// <= 10,000,000,000.00 INR. Result in paise; false otherwise (paise is then
// left unchanged).
bool parse_inr(std::string_view text, uint64_t &paise) noexcept;

// "4999.00" style: always 2 decimals. NUL-terminated; out holds at least
// kMoneyTextMax bytes. Returns the length without the NUL.
size_t format_paise(uint64_t paise, char *out) noexcept;

// USD cents = round_half_up(paise * 10^6 / micro), computed exactly in 128
// bits. Every input pair from parse_inr/parse_rate fits (at most 10^18 cents);
// for other inputs micro == 0 and results above UINT64_MAX give UINT64_MAX,
// an absurd price rather than a free one.
uint64_t usd_cents(uint64_t paise, uint64_t micro) noexcept;

// cents -> "12.05" (always 2 decimals). NUL-terminated; out holds at least
// kMoneyTextMax bytes. Returns the length without the NUL.
size_t format_cents(uint64_t cents, char *out) noexcept;

}  // namespace keyauth
