// SHA-256 of short inputs (API keys, console tokens) through OpenSSL's
// block functions: a context on the stack, no EVP set-up, no allocation, no
// failure, so the request path can hash without a per-call cost beyond the
// compression itself.
#pragma once

#include <array>
#include <string_view>

namespace keyauth {

using Digest = std::array<unsigned char, 32>;

Digest sha256(std::string_view data) noexcept;

}  // namespace keyauth
