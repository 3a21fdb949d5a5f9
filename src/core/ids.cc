#include "ids.h"

#include <openssl/rand.h>

#include <stdexcept>

namespace keyauth {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

Id generate_id(int64_t now_ms) {
    Id id{};
    uint64_t t = static_cast<uint64_t>(now_ms);
    for (int i = 5; i >= 0; i--) {
        id[static_cast<size_t>(i)] = static_cast<unsigned char>(t & 0xff);
        t >>= 8;
    }
    if (RAND_bytes(id.data() + 6, 6) != 1) {
        throw std::runtime_error("RAND_bytes failed: no secure randomness available");
    }
    return id;
}

size_t format_id(std::string_view prefix, const unsigned char *id, char *out) noexcept {
    size_t n = 0;
    for (char c : prefix) {
        out[n++] = c;
    }
    for (size_t i = 0; i < KA_ID_LEN; i++) {
        out[n++] = kHex[id[i] >> 4];
        out[n++] = kHex[id[i] & 0xf];
    }
    return n;
}

std::string id_to_string(std::string_view prefix, const Id &id) {
    std::string s(prefix.size() + kIdTextLen, '\0');
    format_id(prefix, id.data(), s.data());
    return s;
}

bool parse_id(std::string_view prefix, std::string_view text, Id &out) noexcept {
    if (text.size() != prefix.size() + kIdTextLen || text.substr(0, prefix.size()) != prefix) {
        return false;
    }
    text.remove_prefix(prefix.size());
    for (size_t i = 0; i < KA_ID_LEN; i++) {
        int hi = hex_value(text[2 * i]);
        int lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
    return true;
}

}  // namespace keyauth
