#include "key_format.h"

#include <openssl/rand.h>
#include <zlib.h>

#include <stdexcept>

namespace keyauth {
namespace {

constexpr char kAlphabet[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

bool is_base62(char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// Fixed-width base62 of a CRC32 (62^6 > 2^32), most significant digit first.
void encode_checksum(uint32_t crc, char out[kChecksumChars]) {
    for (size_t i = kChecksumChars; i-- > 0;) {
        out[i] = kAlphabet[crc % 62];
        crc /= 62;
    }
}

uint32_t checksum_of(std::string_view s) {
    return static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef *>(s.data()), static_cast<uInt>(s.size())));
}

}  // namespace

bool secret_format_ok(std::string_view secret, std::string_view prefix) noexcept {
    if (secret.size() != secret_length(prefix) || secret.substr(0, prefix.size()) != prefix) {
        return false;
    }
    for (size_t i = prefix.size(); i < secret.size(); i++) {
        if (!is_base62(secret[i])) {
            return false;
        }
    }
    char expected[kChecksumChars];
    encode_checksum(checksum_of(secret.substr(0, secret.size() - kChecksumChars)), expected);
    return secret.substr(secret.size() - kChecksumChars) ==
           std::string_view(expected, kChecksumChars);
}

std::string generate_secret(std::string_view prefix) {
    std::string out(prefix);
    unsigned char buf[64];
    while (out.size() < prefix.size() + kRandomChars) {
        if (RAND_bytes(buf, sizeof buf) != 1) {
            throw std::runtime_error("RAND_bytes failed: no secure randomness available");
        }
        // Rejection sampling: 248 = 4 * 62, so accepted bytes are uniform mod 62.
        for (unsigned char b : buf) {
            if (b < 248 && out.size() < prefix.size() + kRandomChars) {
                out.push_back(kAlphabet[b % 62]);
            }
        }
    }
    char sum[kChecksumChars];
    encode_checksum(checksum_of(out), sum);
    out.append(sum, kChecksumChars);
    return out;
}

}  // namespace keyauth
