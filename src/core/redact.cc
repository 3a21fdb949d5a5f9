#include "redact.h"

#include <cstring>

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

// Where the base62 run of a secret starting at i begins ("ka_", "kac_" or
// "kaa_" read, each possibly escaped) and how many characters that head
// has; 0 if no secret starts at i.
size_t secret_head(const char *text, size_t len, size_t i, size_t *chars) {
    Char k = char_at(text, len, i);
    if (k.c != 'k') return 0;
    Char a = char_at(text, len, i + k.width);
    if (a.width == 0 || a.c != 'a') return 0;
    size_t p = i + k.width + a.width;
    Char u = char_at(text, len, p);
    *chars = 3;
    if (u.width != 0 && (u.c == 'c' || u.c == 'a')) {
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
    // Bytes to mask once the head that starts among them has been read.
    size_t pending_from = 0, pending_to = 0;
    size_t i = 0;
    // Without a '%' in the text every head is a plain "ka_", "kac_" or "kaa_": the
    // scan can jump from one '_' to the next (memchr), which is most of an
    // access-log line's bytes never looked at one by one.
    const bool escapes = std::memchr(text, '%', len) != nullptr;
    while (i < len) {
        if (!escapes) {
            const void *u = std::memchr(text + i, '_', len - i);
            if (u == nullptr) break;
            size_t j = static_cast<size_t>(static_cast<const char *>(u) - text);
            if (j >= i + 3) i = j - 3;
        }
        char c = text[i];
        size_t chars = 0;
        size_t body = (c == 'k' || c == '%') ? secret_head(text, len, i, &chars) : 0;
        if (body == 0) {
            i++;
            continue;
        }
        mask(text, pending_from, pending_to);
        pending_from = pending_to = 0;

        // The run, whatever its length (a secret cut by a log writer is
        // still a secret), even glued to what precedes it ("Bearerka_...").
        // Its characters from the 12th on are masked: from mask_from on.
        size_t p = body, mask_from = len, last[3] = {0, 0, 0};
        for (Char ch = char_at(text, len, p); ch.width != 0 && is_base62(ch.c);
             ch = char_at(text, len, p)) {
            if (chars == kDisplayPrefixLen) mask_from = p;
            last[0] = last[1];
            last[1] = last[2];
            last[2] = p;
            chars++;
            p += ch.width;
        }
        if (mask_from > p) mask_from = p;

        // Another secret may start with the run's last characters
        // ("...ka" + "_..."): it is read before they are masked.
        size_t next_head = p, unused;
        Char next = char_at(text, len, p);
        if (next.width != 0 && next.c == '_') {
            for (size_t k = 0; k < 3 && next_head == p; k++) {
                if (last[k] >= body &&
                    secret_head(text, len, last[k], &unused) == p + next.width) {
                    next_head = last[k];
                }
            }
        }
        size_t now_to = mask_from < next_head ? next_head : mask_from;
        mask(text, mask_from, now_to);
        if (now_to < p) {
            pending_from = now_to;
            pending_to = p;
        }
        bool any = mask_from < p;

        // A cut escape ("%" or "%4" where "%4A" was) would still tell a few
        // bits of the next character.
        if (chars >= kDisplayPrefixLen && next.width == 1 && next.c == '%') {
            size_t end = p + 1;
            if (end < len && hex_value(static_cast<unsigned char>(text[end])) >= 0) end++;
            mask(text, p, end);
            any = true;
        }
        if (any) masked++;
        i = next_head;
    }
    mask(text, pending_from, pending_to);
    return masked;
}

}  // namespace keyauth
