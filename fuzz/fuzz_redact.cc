// Log masking: the bytes of any log line, as a client shaped them, with a
// secret planted at a chosen offset, plain or percent-encoded, of the default
// head or of a deployment's own prefix NAME, and the line cut at a chosen
// length (as nginx cuts its lines). Whatever the bytes: the length is kept,
// only '*' is written, a second pass changes nothing, no "ka_"/"kac_"/"kaa_"
// is left followed by more than its 12-character prefix, no other NAME head
// is left followed by more than its prefix of a run that is a whole body or
// holds an uppercase letter, and nothing of the planted secret past its
// prefix survives (unless it was cut before its body's first uppercase
// letter: redact.h's rule for a NAME it does not know).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "key_format.h"
#include "redact.h"
#include "../tests/percent_encoded.h"

namespace {

// A key-shaped body (its checksum is not checked by the masker): its first
// uppercase letter is its 11th character.
const std::string kBody = "0123456789ABCDEFGHIJKLMNOPQRSTUVwxyz01";
constexpr size_t kFirstUpper = 10;
// Heads: the default, and NAMEs of 2, 4 and 10 characters (none starting
// with a hex digit, which a "%X" cut before it would take into an escape).
const std::string kHeads[] = {"ka_", "x9_", "zeta_", "xyzw123456_"};

bool name_char(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

bool base62(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

int hex(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// The text as characters (a complete %XX escape is one): a second reading,
// written apart from redact.cc.
std::string decode(const std::string &s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        if (s[i] == '%' && i + 2 < s.size() &&
            hex(static_cast<unsigned char>(s[i + 1])) >= 0 && hex(static_cast<unsigned char>(s[i + 2])) >= 0) {
            out += static_cast<char>(hex(static_cast<unsigned char>(s[i + 1])) * 16 +
                                     hex(static_cast<unsigned char>(s[i + 2])));
            i += 3;
        } else {
            out += s[i];
            i += 1;
        }
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < 4) return 0;
    // data[0..1]: where the secret goes, data[2]: encoded or not and its
    // head, data[3]: where the line is cut
    size_t rest = size - 4;
    size_t at = (static_cast<size_t>(data[0]) << 8 | data[1]) % (rest + 1);
    bool enc = data[2] & 1;
    const std::string &head = kHeads[(data[2] >> 1) % 4];
    const std::string plain = head + kBody;
    std::string secret = enc ? keyauth::testing::percent_encoded(plain) : plain;
    std::string line(reinterpret_cast<const char *>(data + 4), at);
    line += secret;
    line.append(reinterpret_cast<const char *>(data + 4 + at), rest - at);
    size_t cut = at + (data[3] % (secret.size() + 8));
    if (cut < line.size()) line.resize(cut);

    std::string out = line;
    keyauth::redact_secrets(out.data(), out.size());

    if (out.size() != line.size()) __builtin_trap();
    for (size_t k = 0; k < out.size(); k++) {
        if (out[k] != line[k] && out[k] != '*') __builtin_trap();
    }
    std::string again = out;
    keyauth::redact_secrets(again.data(), again.size());
    if (again != out) __builtin_trap();

    // no head followed by more than the display prefix
    std::string text = decode(out);
    for (size_t i = 0; i < text.size(); i++) {
        size_t head = 0;
        if (text.compare(i, 3, "ka_") == 0) head = 3;
        else if (text.compare(i, 4, "kac_") == 0 || text.compare(i, 4, "kaa_") == 0) head = 4;
        if (head == 0) continue;
        size_t n = head;
        while (i + n < text.size() && base62(static_cast<unsigned char>(text[i + n]))) n++;
        if (n > keyauth::kDisplayPrefixLen) __builtin_trap();
    }
    // no NAME head followed by more than its prefix of a secret-like run
    for (size_t u = 0; u < text.size(); u++) {
        if (text[u] != '_') continue;
        size_t name = 0;
        while (name < u && name < keyauth::kMaxKeyPrefixName && name_char(static_cast<unsigned char>(text[u - name - 1])))
            name++;
        if (name < keyauth::kMinKeyPrefixName) continue;
        size_t n = 0;
        bool upper = false;
        for (; u + 1 + n < text.size() && base62(static_cast<unsigned char>(text[u + 1 + n])); n++)
            upper = upper || (text[u + 1 + n] >= 'A' && text[u + 1 + n] <= 'Z');
        if ((upper || n >= keyauth::kRandomChars) && name + 1 + n > keyauth::kDisplayPrefixLen) __builtin_trap();
    }

    // the planted secret: every byte past its prefix is masked, as far as the line goes
    size_t per_char = enc ? 3 : 1;
    const size_t in_line = std::min(line.size() - at, secret.size()) / per_char;  // its characters there
    const bool any_length = head == "ka_";
    if (any_length || in_line >= secret.size() / per_char || in_line > head.size() + kFirstUpper) {
        for (size_t k = at + per_char * keyauth::kDisplayPrefixLen; k < at + secret.size() && k < out.size(); k++) {
            if (out[k] != '*') __builtin_trap();
        }
    }
    return 0;
}
