#include "key_format.h"

#include "crc32.h"

#include <openssl/rand.h>
#include <zlib.h>

#include <stdexcept>

namespace keyauth {
namespace {

constexpr char kAlphabet[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Digit value of each byte in kAlphabet, kNotBase62 for any other byte: the
// alphabet check and the checksum's decoding in one lookup.
constexpr unsigned char kNotBase62 = 0xff;
struct DigitTable {
    unsigned char value[256];
    constexpr DigitTable() : value() {
        for (int i = 0; i < 256; i++) value[i] = kNotBase62;
        for (int i = 0; i < 62; i++) {
            value[static_cast<unsigned char>(kAlphabet[i])] = static_cast<unsigned char>(i);
        }
    }
};
constexpr DigitTable kDigits;

// Fixed-width base62 of a CRC32 (62^6 > 2^32), most significant digit first.
void encode_checksum(uint32_t crc, char out[kChecksumChars]) {
    for (size_t i = kChecksumChars; i-- > 0;) {
        out[i] = kAlphabet[crc % 62];
        crc /= 62;
    }
}

// zlib's CRC when a secret is made, crc32_short's when one is checked: each
// key made is a check of the one against the other.
uint32_t checksum_of(std::string_view s) {
    return static_cast<uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef *>(s.data()), static_cast<uInt>(s.size())));
}

// The base62 run after a head of `head` bytes and its checksum (the length
// is the caller's to check).
bool body_and_checksum_ok(std::string_view secret, size_t head) noexcept {
    const auto *p = reinterpret_cast<const unsigned char *>(secret.data());
    const size_t body = secret.size() - kChecksumChars;
    unsigned char bad = 0;  // the OR of all digit values: over 63 if one is not a digit
    for (size_t i = head; i < body; i++) bad |= kDigits.value[p[i]];
    // The checksum digits decoded, rather than the CRC encoded: no division.
    uint64_t sum = 0;
    for (size_t i = body; i < secret.size(); i++) {
        unsigned char d = kDigits.value[p[i]];
        bad |= d;
        sum = sum * 62 + d;
    }
    return (bad & 0xc0) == 0 && sum == crc32_short(p, body);
}

}  // namespace

bool secret_format_ok(std::string_view secret, std::string_view prefix) noexcept {
    if (secret.size() != secret_length(prefix) || secret.substr(0, prefix.size()) != prefix) {
        return false;
    }
    return body_and_checksum_ok(secret, prefix.size());
}

bool valid_key_prefix_name(std::string_view name) noexcept {
    if (name.size() < kMinKeyPrefixName || name.size() > kMaxKeyPrefixName) return false;
    for (char c : name) {
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    return name != kConsoleTokenPrefix.substr(0, 3) && name != kAdminTokenPrefix.substr(0, 3);
}

bool key_format_ok(std::string_view secret) noexcept {
    // The length says where the '_' is: NAME + "_" + 38 characters.
    constexpr size_t kTail = 1 + kRandomChars + kChecksumChars;
    if (secret.size() < kMinKeyPrefixName + kTail || secret.size() > kMaxKeyPrefixName + kTail) return false;
    const size_t name = secret.size() - kTail;
    return secret[name] == '_' && valid_key_prefix_name(secret.substr(0, name)) &&
           body_and_checksum_ok(secret, name + 1);
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
