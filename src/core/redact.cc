#include "redact.h"

#include <cstring>

#include "key_format.h"

namespace keyauth {
namespace {

bool is_base62(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

bool is_name_char(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// One character of the text: a byte as it is, or a complete %XX escape as
// the byte it stands for. width is 0 past either end of the text.
struct Char {
    unsigned char c;
    size_t width;
};

// The character that starts at byte i.
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

// The character that ends right before byte `end`. Read backwards the same
// as forwards: the 2nd and 3rd bytes of an escape are hex digits, never a
// '%', so "%XX" before `end` is always one escape.
Char char_before(const char *text, size_t end) {
    if (end == 0) return {0, 0};
    if (end >= 3 && text[end - 3] == '%') {
        int hi = hex_value(static_cast<unsigned char>(text[end - 2]));
        int lo = hex_value(static_cast<unsigned char>(text[end - 1]));
        if (hi >= 0 && lo >= 0) return {static_cast<unsigned char>(hi * 16 + lo), 3};
    }
    return {static_cast<unsigned char>(text[end - 1]), 1};
}

// What precedes an underscore: how many [a-z0-9] characters (at most a
// prefix NAME's 10), and whether they end in "ka", "kac" or "kaa" (the
// default key head and the tokens'), whose characters that is (0: neither).
struct HeadBefore {
    size_t name_chars;
    size_t reserved_chars;
};

HeadBefore head_before(const char *text, size_t underscore) {
    unsigned char last[3] = {0, 0, 0};  // last[0] right before the underscore
    size_t n = 0, end = underscore;
    while (n < kMaxKeyPrefixName) {
        Char c = char_before(text, end);
        if (c.width == 0 || !is_name_char(c.c)) break;
        if (n < 3) last[n] = c.c;
        n++;
        end -= c.width;
    }
    size_t reserved = 0;
    if (n >= 3 && last[2] == 'k' && last[1] == 'a' && (last[0] == 'c' || last[0] == 'a')) {
        reserved = 3;
    } else if (n >= 2 && last[1] == 'k' && last[0] == 'a') {
        reserved = 2;
    }
    return {n, reserved};
}

// The base62 run after an underscore: its characters, where the first
// kMaxKeyPrefixName of them start (what a head keeps is fewer), where it
// ends, and whether it holds an uppercase letter.
struct Run {
    size_t chars = 0;
    size_t at[kMaxKeyPrefixName] = {};
    size_t end = 0;
    bool upper = false;
};

Run run_from(const char *text, size_t len, size_t p) {
    Run r;
    for (Char ch = char_at(text, len, p); ch.width != 0 && is_base62(ch.c); ch = char_at(text, len, p)) {
        if (r.chars < kMaxKeyPrefixName) r.at[r.chars] = p;
        r.upper = r.upper || (ch.c >= 'A' && ch.c <= 'Z');
        r.chars++;
        p += ch.width;
    }
    r.end = p;
    return r;
}

// How many characters of the head before an underscore belong to a secret
// whose run `r` follows it (0: none does). The default and the tokens'
// heads count whatever the run ("ka_" + a word loses its tail too); any
// other NAME when the run is a whole secret body or holds an uppercase
// letter, as a cut secret all but always does and a word or an id seldom.
// A head glued to a word may start anywhere in it: the longest is taken,
// which keeps the fewest characters.
size_t secret_head_chars(const HeadBefore &h, const Run &r) {
    const bool named = h.name_chars >= kMinKeyPrefixName && (r.chars >= kRandomChars || r.upper);
    return named ? h.name_chars : h.reserved_chars;
}

void mask(char *text, size_t from, size_t to) {
    for (size_t k = from; k < to; k++) text[k] = '*';
}

}  // namespace

size_t redact_secrets(char *text, size_t len) noexcept {
    size_t masked = 0;
    // What to mask of the last secret found: written once the next head has
    // been read, which may be made of that secret's last characters.
    size_t pending_from = 0, pending_to = 0;
    // Without a '%' in the text every character is a byte: the scan jumps
    // from one '_' to the next (memchr), and most of an access-log line's
    // bytes are never looked at one by one.
    const bool escapes = std::memchr(text, '%', len) != nullptr;
    size_t i = 0;
    while (i < len) {
        if (!escapes) {
            const void *u = std::memchr(text + i, '_', len - i);
            if (u == nullptr) break;
            i = static_cast<size_t>(static_cast<const char *>(u) - text);
        }
        const Char c = char_at(text, len, i);
        if (c.c != '_') {
            i += c.width;
            continue;
        }
        const HeadBefore before = head_before(text, i);
        if (before.name_chars < kMinKeyPrefixName) {
            i += c.width;
            continue;
        }
        const Run run = run_from(text, len, i + c.width);
        const size_t head = secret_head_chars(before, run);
        i = run.end;  // no '_' in the run
        if (head == 0) continue;

        // The run keeps what makes the secret's first kDisplayPrefixLen
        // characters (the head and its '_' among them), even glued to what
        // precedes it ("Bearerka_..."), whatever its length (a secret cut by
        // a log writer is still a secret).
        const size_t keep = kDisplayPrefixLen - head - 1;
        size_t from = run.chars > keep ? run.at[keep] : run.end, to = run.end;
        // A cut escape ("%" or "%4" where "%4A" was) would still tell a few
        // bits of the next character.
        const Char next = char_at(text, len, run.end);
        if (run.chars >= keep && next.width == 1 && next.c == '%') {
            to = run.end + 1;
            if (to < len && hex_value(static_cast<unsigned char>(text[to])) >= 0) to++;
        }
        if (from < to) {
            mask(text, pending_from, pending_to);
            pending_from = from;
            pending_to = to;
            masked++;
        }
    }
    mask(text, pending_from, pending_to);
    return masked;
}

}  // namespace keyauth
