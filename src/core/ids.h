// Record identifiers: 12 bytes = 48-bit big-endian creation time in ms + 48
// random bits, so ids sort in creation order. Shown to users as a type
// prefix + 24 lowercase hex digits ("key_0193a1...").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "keyauth_schema.h"

namespace keyauth {

using Id = std::array<unsigned char, KA_ID_LEN>;

inline constexpr std::string_view kKeyIdPrefix = "key_";
inline constexpr std::string_view kAccountIdPrefix = "acc_";
inline constexpr std::string_view kEventIdPrefix = "evt_";
inline constexpr size_t kIdTextLen = 2 * KA_ID_LEN;

// Throws std::runtime_error if the CSPRNG fails.
Id generate_id(int64_t now_ms);

// The creation time an id carries (its first six bytes).
inline int64_t id_time_ms(const unsigned char *id) noexcept {
    int64_t ms = 0;
    for (int i = 0; i < 6; i++) ms = (ms << 8) | id[i];
    return ms;
}

// Writes prefix + hex into out (no allocation); returns the length written.
// out must hold prefix.size() + kIdTextLen bytes.
size_t format_id(std::string_view prefix, const unsigned char *id, char *out) noexcept;
std::string id_to_string(std::string_view prefix, const Id &id);

// Strict: exact prefix, exactly 24 lowercase hex digits.
bool parse_id(std::string_view prefix, std::string_view text, Id &out) noexcept;

}  // namespace keyauth
