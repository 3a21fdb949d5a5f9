#include "ip_address.h"

#include <cstring>

namespace keyauth {
namespace {

constexpr size_t kMaxText = 45;  // "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"
constexpr char kHex[] = "0123456789abcdef";

// One entry of an IANA special-purpose registry. Prefixes are stored as 16
// bytes for both families; IPv4 uses the first 4.
struct Rule {
    unsigned char prefix[16];
    int len;  // prefix length in bits
    const char *type;
};

// Each table is sorted by descending prefix length (checked at compile time
// below), so the first match is the most specific one.
constexpr Rule kV4Rules[] = {
    {{0, 0, 0, 0}, 32, "unspecified"},
    {{255, 255, 255, 255}, 32, "broadcast"},
    {{192, 0, 0}, 24, "ietf-protocol"},
    {{192, 0, 2}, 24, "documentation"},
    {{192, 88, 99}, 24, "6to4-relay"},
    {{198, 51, 100}, 24, "documentation"},
    {{203, 0, 113}, 24, "documentation"},
    {{169, 254}, 16, "link-local"},
    {{192, 168}, 16, "private"},
    {{198, 18}, 15, "benchmarking"},
    {{172, 16}, 12, "private"},
    {{100, 64}, 10, "shared"},
    {{0}, 8, "this-network"},
    {{10}, 8, "private"},
    {{127}, 8, "loopback"},
    {{224}, 4, "multicast"},
    {{240}, 4, "reserved"},
    {{0}, 0, "global"},
};

constexpr Rule kV6Rules[] = {
    {{0}, 128, "unspecified"},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "loopback"},
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, "ipv4-mapped"},
    {{0x00, 0x64, 0xff, 0x9b}, 96, "ipv4-ipv6-translation"},
    {{0x01, 0x00}, 64, "discard-only"},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "ipv4-ipv6-translation"},
    {{0x20, 0x01, 0x00, 0x02}, 48, "benchmarking"},
    {{0x20, 0x01, 0x00, 0x00}, 32, "teredo"},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
    {{0x20, 0x01, 0x00, 0x10}, 28, "orchid"},
    {{0x20, 0x01, 0x00, 0x20}, 28, "orchid"},
    {{0x20, 0x01, 0x00, 0x00}, 23, "ietf-protocol"},
    {{0x3f, 0xff, 0x00}, 20, "documentation"},
    {{0x20, 0x02}, 16, "6to4"},
    {{0xfe, 0x80}, 10, "link-local"},
    {{0xff}, 8, "multicast"},
    {{0xfc}, 7, "unique-local"},
    {{0x20}, 3, "global"},
    {{0}, 0, "reserved"},  // everything outside 2000::/3
};

// Compile-time guards against table typos: longest prefix first, no bits
// set past the prefix length, and a /0 catch-all at the end.
template <size_t N>
constexpr bool table_ok(const Rule (&rules)[N], int max_len) {
    for (size_t i = 0; i < N; i++) {
        const Rule &r = rules[i];
        if (r.len < 0 || r.len > max_len || r.type == nullptr) return false;
        if (i > 0 && rules[i - 1].len < r.len) return false;
        for (int bit = r.len; bit < 128; bit++) {
            if (r.prefix[bit / 8] & (0x80 >> (bit % 8))) return false;
        }
    }
    return N > 0 && rules[N - 1].len == 0;
}
static_assert(table_ok(kV4Rules, 32), "IPv4 rules must be sorted, clean, and end with /0");
static_assert(table_ok(kV6Rules, 128), "IPv6 rules must be sorted, clean, and end with /0");

bool in_prefix(const unsigned char *addr, const Rule &r) noexcept {
    size_t whole = static_cast<size_t>(r.len / 8);
    if (std::memcmp(addr, r.prefix, whole) != 0) return false;
    int rest = r.len % 8;
    if (rest == 0) return true;
    unsigned mask = (0xffu << (8 - rest)) & 0xffu;
    return (addr[whole] & mask) == r.prefix[whole];
}

template <size_t N>
const char *classify(const unsigned char *addr, const Rule (&rules)[N]) noexcept {
    for (const Rule &r : rules) {
        if (in_prefix(addr, r)) return r.type;
    }
    return rules[N - 1].type;  // unreachable: the last rule is /0
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Exactly four decimal octets; a leading zero is refused because inet_aton
// and friends would read "010" as octal 8.
bool parse_v4(std::string_view s, unsigned char *out) noexcept {
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= s.size() || s[i] != '.') return false;
            i++;
        }
        size_t start = i;
        unsigned value = 0;
        while (i < s.size() && is_digit(s[i]) && i - start < 3) {
            value = value * 10 + static_cast<unsigned>(s[i] - '0');
            i++;
        }
        size_t digits = i - start;
        if (digits == 0 || value > 255 || (digits > 1 && s[start] == '0')) return false;
        out[part] = static_cast<unsigned char>(value);
    }
    return i == s.size();  // a fourth digit or anything else left over fails here
}

// RFC 4291 §2.2: groups of 1-4 hex digits, at most one "::" standing for one
// or more zero groups, and an optional dotted quad as the last 32 bits.
bool parse_v6(std::string_view s, unsigned char *out) noexcept {
    unsigned groups[8] = {};
    int n = 0;     // groups parsed
    int gap = -1;  // index in groups where "::" stands, or -1
    size_t i = 0;
    if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
        gap = 0;
        i = 2;
        if (i == s.size()) {
            std::memset(out, 0, 16);
            return true;
        }
    }
    for (;;) {
        size_t start = i;
        while (i < s.size() && hex_value(s[i]) >= 0) i++;
        if (i < s.size() && s[i] == '.') {
            // The dotted tail must end the text and fill the last two groups.
            if (n > 6) return false;
            unsigned char v4[4];
            if (!parse_v4(s.substr(start), v4)) return false;
            groups[n++] = (unsigned{v4[0]} << 8) | v4[1];
            groups[n++] = (unsigned{v4[2]} << 8) | v4[3];
            break;
        }
        size_t digits = i - start;
        if (digits == 0 || digits > 4 || n == 8) return false;
        unsigned value = 0;
        for (size_t k = start; k < i; k++) value = (value << 4) | static_cast<unsigned>(hex_value(s[k]));
        groups[n++] = value;
        if (i == s.size()) break;
        if (s[i] != ':') return false;
        i++;
        if (i < s.size() && s[i] == ':') {
            if (gap >= 0) return false;
            gap = n;
            i++;
            if (i == s.size()) break;
        } else if (i == s.size()) {
            return false;  // a single trailing ':'
        }
    }
    if (gap < 0 ? n != 8 : n > 7) return false;  // "::" must stand for at least one group

    unsigned full[8] = {};
    if (gap < 0) {
        std::memcpy(full, groups, sizeof full);
    } else {
        int tail = n - gap;
        for (int k = 0; k < gap; k++) full[k] = groups[k];
        for (int k = 0; k < tail; k++) full[8 - tail + k] = groups[gap + k];
    }
    for (int k = 0; k < 8; k++) {
        out[2 * k] = static_cast<unsigned char>(full[k] >> 8);
        out[2 * k + 1] = static_cast<unsigned char>(full[k] & 0xff);
    }
    return true;
}

// Bounded writer into a fixed char buffer; the buffers in IpInfo are sized
// for the longest output, so overflow would be a bug, not bad input.
struct Writer {
    char *buf;
    size_t cap;  // including the NUL
    size_t len = 0;

    void put(char c) noexcept {
        if (len + 1 < cap) buf[len++] = c;
        buf[len] = '\0';
    }
    void put(const char *s) noexcept {
        while (*s) put(*s++);
    }
    void put_decimal(unsigned v) noexcept {
        if (v >= 100) put(static_cast<char>('0' + v / 100));
        if (v >= 10) put(static_cast<char>('0' + v / 10 % 10));
        put(static_cast<char>('0' + v % 10));
    }
    void put_hex_group(unsigned v) noexcept {
        bool started = false;
        for (int shift = 12; shift >= 0; shift -= 4) {
            unsigned nibble = (v >> shift) & 0xf;
            if (nibble != 0 || started || shift == 0) {
                put(kHex[nibble]);
                started = true;
            }
        }
    }
    void put_dotted(const unsigned char *b) noexcept {
        for (int k = 0; k < 4; k++) {
            if (k > 0) put('.');
            put_decimal(b[k]);
        }
    }
};

bool is_v4_mapped(const unsigned char *b) noexcept {
    static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(b, kMapped, sizeof kMapped) == 0;
}

// RFC 5952 §4-5: lowercase, no leading zeros, the longest run of two or more
// zero groups (the first on ties) as "::", and the dotted tail for mapped.
void write_v6_canonical(const unsigned char *b, Writer &w) noexcept {
    if (is_v4_mapped(b)) {
        w.put("::ffff:");
        w.put_dotted(b + 12);
        return;
    }
    unsigned groups[8];
    for (int k = 0; k < 8; k++) groups[k] = (unsigned{b[2 * k]} << 8) | b[2 * k + 1];
    int best_start = -1, best_len = 1;  // a single zero group is never compressed
    for (int k = 0; k < 8;) {
        if (groups[k] != 0) {
            k++;
            continue;
        }
        int start = k;
        while (k < 8 && groups[k] == 0) k++;
        if (k - start > best_len) {
            best_start = start;
            best_len = k - start;
        }
    }
    for (int k = 0; k < 8; k++) {
        if (k == best_start) {
            w.put("::");
            k += best_len - 1;
            continue;
        }
        if (k > 0 && k != best_start + best_len) w.put(':');
        w.put_hex_group(groups[k]);
    }
}

}  // namespace

bool parse_ip(std::string_view text, IpInfo &out) noexcept {
    out = IpInfo{};
    if (text.empty() || text.size() > kMaxText) return false;

    unsigned char bytes[16] = {};
    bool v6 = text.find(':') != std::string_view::npos;
    if (!(v6 ? parse_v6(text, bytes) : parse_v4(text, bytes))) return false;

    out.version = v6 ? 6 : 4;
    std::memcpy(out.bytes, bytes, sizeof out.bytes);
    Writer canonical{out.canonical, sizeof out.canonical};
    Writer ptr{out.reverse_dns, sizeof out.reverse_dns};
    if (v6) {
        out.type = classify(bytes, kV6Rules);
        write_v6_canonical(bytes, canonical);
        for (int k = 15; k >= 0; k--) {
            ptr.put(kHex[bytes[k] & 0xf]);
            ptr.put('.');
            ptr.put(kHex[bytes[k] >> 4]);
            ptr.put('.');
        }
        ptr.put("ip6.arpa");
    } else {
        out.type = classify(bytes, kV4Rules);
        canonical.put_dotted(bytes);
        unsigned char reversed[4] = {bytes[3], bytes[2], bytes[1], bytes[0]};
        ptr.put_dotted(reversed);
        ptr.put(".in-addr.arpa");
    }
    return true;
}

}  // namespace keyauth
