// Authorization header -> Bearer token -> key format check (of the default
// head and tokens, and of a key of any prefix NAME), and log redaction:
// the bytes every request brings before anything is looked up. The request
// path's parse and check are tuned (pointer scans, tables, the checksum
// decoded); each is held against a plain reference of the documented rule.
#include <zlib.h>

#include <cctype>
#include <cstring>
#include <string>

#include "auth_header.h"
#include "key_format.h"
#include "redact.h"

namespace {

constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

bool blank(char c) { return c == ' ' || c == '\t'; }

// RFC 6750 as documented in auth_header.h, one character at a time.
keyauth::BearerParse reference_parse(std::string_view h, std::string_view &token) {
    size_t i = 0;
    while (i < h.size() && blank(h[i])) i++;
    std::string scheme;
    for (size_t j = i; j < h.size() && j < i + 6; j++) scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(h[j])));
    if (scheme != "bearer" || (h.size() > i + 6 && !blank(h[i + 6]))) return keyauth::BearerParse::kMissing;
    i += 6;
    while (i < h.size() && blank(h[i])) i++;
    size_t start = i;
    while (i < h.size() && !blank(h[i])) i++;
    if (i == start) return keyauth::BearerParse::kMissing;
    token = h.substr(start, i - start);
    while (i < h.size() && blank(h[i])) i++;
    return i == h.size() ? keyauth::BearerParse::kFound : keyauth::BearerParse::kMalformed;
}

std::string checksum_text(std::string_view body) {
    uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef *>(body.data()), static_cast<uInt>(body.size())));
    std::string out(keyauth::kChecksumChars, '0');
    for (size_t i = out.size(); i-- > 0;) {
        out[i] = kAlphabet[crc % 62];
        crc /= 62;
    }
    return out;
}

// key_format.h's rule: prefix, length, base62, and the CRC32 encoded.
bool reference_format_ok(std::string_view s, std::string_view prefix) {
    if (s.size() != keyauth::secret_length(prefix) || s.substr(0, prefix.size()) != prefix) return false;
    for (size_t i = prefix.size(); i < s.size(); i++)
        if (!std::strchr(kAlphabet, s[i]) || s[i] == '\0') return false;
    size_t body = s.size() - keyauth::kChecksumChars;
    return s.substr(body) == checksum_text(s.substr(0, body));
}

// key_format.h's rule for a key of any prefix NAME: 2 to 10 of [a-z0-9],
// not "kac" or "kaa", then '_' and the rule above.
bool reference_key_ok(std::string_view s) {
    size_t u = s.find('_');
    if (u == std::string_view::npos || u < 2 || u > 10) return false;
    std::string_view name = s.substr(0, u);
    for (char c : name)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    return name != "kac" && name != "kaa" && reference_format_ok(s, s.substr(0, u + 1));
}

void check_format(std::string_view token) {
    if (keyauth::key_format_ok(token) != reference_key_ok(token)) __builtin_trap();
    // with its checksum made right, for any head the token has
    if (token.size() > keyauth::kChecksumChars) {
        std::string fixed(token.substr(0, token.size() - keyauth::kChecksumChars));
        fixed += checksum_text(fixed);
        if (keyauth::key_format_ok(fixed) != reference_key_ok(fixed)) __builtin_trap();
    }
    for (std::string_view prefix : {keyauth::kKeyPrefix, keyauth::kConsoleTokenPrefix}) {
        if (keyauth::secret_format_ok(token, prefix) != reference_format_ok(token, prefix)) __builtin_trap();
        // the same token with its checksum made right: random bytes seldom
        // have one, and the accepting path must be explored too
        if (token.size() == keyauth::secret_length(prefix)) {
            std::string fixed(token.substr(0, token.size() - keyauth::kChecksumChars));
            fixed += checksum_text(fixed);
            if (keyauth::secret_format_ok(fixed, prefix) != reference_format_ok(fixed, prefix)) __builtin_trap();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view header(reinterpret_cast<const char *>(data), size);
    std::string_view token, expected;
    keyauth::BearerParse r = keyauth::parse_bearer(header, token);
    if (r != reference_parse(header, expected)) __builtin_trap();
    // the token is defined only when found
    if (r == keyauth::BearerParse::kFound && token != expected) __builtin_trap();
    if (r == keyauth::BearerParse::kFound) {
        // the token is a slice of the header
        if (token.empty() || token.data() < header.data() ||
            token.data() + token.size() > header.data() + header.size()) {
            __builtin_trap();
        }
    }
    check_format(r == keyauth::BearerParse::kFound ? token : header);
    std::string copy(header);
    keyauth::redact_secrets(copy.data(), copy.size());
    if (copy.size() != size) __builtin_trap();  // masking never changes the length
    return 0;
}
