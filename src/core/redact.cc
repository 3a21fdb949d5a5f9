#include "redact.h"

#include "key_format.h"

namespace keyauth {
namespace {

bool is_base62(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// One character of the text at i: a byte as it is, or a complete %XX escape
// as the byte it stands for. width is 0 at the end of the text.
struct Char {
    unsigned char c;
    size_t width;
};

Char char_at(const char *text, size_t len, size_t i) {
    if (i >= len) return {0, 0};
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '%' && len - i >= 3) {
        int hi = hex_value(static_cast<unsigned char>(text[i + 1]));
        int lo = hex_value(static_cast<unsigned char>(text[i + 2]));
        if (hi >= 0 && lo >= 0) return {static_cast<unsigned char>(hi * 16 + lo), 3};
    }
    return {c, 1};
}

// Where the base62 run of a secret starting at i begins ("ka_" or "kac_"
// read, each possibly escaped) and how many characters that head has; 0 if
// no secret starts at i.
size_t secret_head(const char *text, size_t len, size_t i, size_t *chars) {
    Char k = char_at(text, len, i);
    if (k.c != 'k') return 0;
    Char a = char_at(text, len, i + k.width);
    if (a.width == 0 || a.c != 'a') return 0;
    size_t p = i + k.width + a.width;
    Char u = char_at(text, len, p);
    *chars = 3;
    if (u.width != 0 && u.c == 'c') {
        p += u.width;
        u = char_at(text, len, p);
        *chars = 4;
    }
    if (u.width == 0 || u.c != '_') return 0;
    return p + u.width;
}

void mask(char *text, size_t from, size_t to) {
    for (size_t k = from; k < to; k++) text[k] = '*';
}

}  // namespace

size_t redact_secrets(char *text, size_t len) noexcept {
    size_t masked = 0;
    size_t i = 0;
    while (i < len) {
        char c = text[i];
        size_t chars = 0;
        size_t p = (c == 'k' || c == '%') ? secret_head(text, len, i, &chars) : 0;
        if (p == 0) {
            i++;
            continue;
        }
        // Even glued to what precedes it ("Bearerka_..."), and whatever the
        // run's length: a secret cut by a log writer is still a secret.
        bool any = false;
        for (Char ch = char_at(text, len, p); ch.width != 0 && is_base62(ch.c);
             ch = char_at(text, len, p)) {
            if (chars >= kDisplayPrefixLen) {
                mask(text, p, p + ch.width);
                any = true;
            }
            chars++;
            p += ch.width;
        }
        // A cut escape ("%" or "%4" where "%4A" was) would still tell a few
        // bits of the next character.
        Char next = char_at(text, len, p);
        if (chars >= kDisplayPrefixLen && next.width == 1 && next.c == '%') {
            size_t end = p + 1;
            if (end < len && hex_value(static_cast<unsigned char>(text[end])) >= 0) end++;
            mask(text, p, end);
            any = true;
        }
        if (any) masked++;
        i = p;
    }
    return masked;
}

}  // namespace keyauth
