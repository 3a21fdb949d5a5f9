// API key and console token format: <prefix> + 32 base62 random characters
// (190 bits from RAND_bytes) + 6 base62 characters of CRC32 over everything
// before them. The checksum rejects typos and foreign strings before any
// hashing or lookup, and gives secret scanners a way to confirm a leak.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace keyauth {

inline constexpr std::string_view kKeyPrefix = "ka_";
inline constexpr std::string_view kConsoleTokenPrefix = "kac_";
inline constexpr std::string_view kAdminTokenPrefix = "kaa_";  // the admin API's
inline constexpr size_t kRandomChars = 32;
inline constexpr size_t kChecksumChars = 6;
inline constexpr size_t kDisplayPrefixLen = 12;  // "prefix" metadata shown to users

inline constexpr size_t secret_length(std::string_view prefix) {
    return prefix.size() + kRandomChars + kChecksumChars;
}

// Cheap, allocation-free: prefix, length, alphabet and checksum.
bool secret_format_ok(std::string_view secret, std::string_view prefix) noexcept;

// A fresh secret from the OpenSSL CSPRNG. Throws std::runtime_error if the
// CSPRNG fails (never called inside nginx).
std::string generate_secret(std::string_view prefix);

}  // namespace keyauth
