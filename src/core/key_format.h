// API key and console token format: <prefix> + 32 base62 random characters
// (190 bits from RAND_bytes) + 6 base62 characters of CRC32 over everything
// before them. The checksum rejects typos and foreign strings before any
// hashing or lookup, and gives secret scanners a way to confirm a leak.
//
// A key's prefix is NAME + "_": the deployment's own NAME (keyauthctl config
// set key-prefix), "ka" by default. The edge does not know a deployment's
// names: it takes a key of any NAME with a valid checksum and looks it up;
// a key made under another deployment's NAME is simply not found.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace keyauth {

inline constexpr std::string_view kKeyPrefix = "ka_";  // NAME "ka": the default
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

// A key prefix's NAME: 2 to 10 of [a-z0-9], and not "kac" nor "kaa" (the
// console and admin tokens' heads).
inline constexpr size_t kMinKeyPrefixName = 2;
inline constexpr size_t kMaxKeyPrefixName = 10;
inline constexpr std::string_view kDefaultKeyPrefixName = "ka";
bool valid_key_prefix_name(std::string_view name) noexcept;

// An API key of any NAME (secret_format_ok with the prefix NAME + "_" that
// the length says): as cheap, allocation-free. A console or admin token is
// no key.
bool key_format_ok(std::string_view secret) noexcept;

// A fresh secret from the OpenSSL CSPRNG. Throws std::runtime_error if the
// CSPRNG fails (never called inside nginx).
std::string generate_secret(std::string_view prefix);

}  // namespace keyauth
