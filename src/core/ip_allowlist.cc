#include "ip_allowlist.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "ip_address.h"

namespace keyauth {
namespace {

constexpr unsigned char kMappedHead[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool is_mapped(const unsigned char addr[16]) { return std::memcmp(addr, kMappedHead, 12) == 0; }

bool host_bits_clear(const unsigned char entry[kCidrEntryBytes]) noexcept {
    static const unsigned char zero[16] = {};
    const unsigned bits = entry[16];
    unsigned char masked[16];
    std::memcpy(masked, entry, 16);
    for (unsigned i = 0; i < 16; i++) {
        const unsigned keep = bits >= (i + 1) * 8 ? 8 : bits > i * 8 ? bits - i * 8 : 0;
        masked[i] &= static_cast<unsigned char>(keep == 8 ? 0 : 0xff >> keep);
    }
    return std::memcmp(masked, zero, 16) == 0;
}

bool parse_bits(std::string_view s, unsigned max, unsigned &bits) noexcept {
    if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
    bits = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        bits = bits * 10 + static_cast<unsigned>(c - '0');
    }
    return bits <= max;
}

}  // namespace

CidrParse parse_cidr(std::string_view text, unsigned char out[kCidrEntryBytes]) noexcept {
    std::memset(out, 0, kCidrEntryBytes);
    const size_t slash = text.find('/');
    IpInfo ip;
    if (!parse_ip(text.substr(0, slash), ip)) return CidrParse::kSyntax;
    const bool v4 = ip.version == 4;
    unsigned bits = v4 ? 32 : 128;
    if (slash != std::string_view::npos && !parse_bits(text.substr(slash + 1), bits, bits))
        return CidrParse::kSyntax;
    if (v4) {
        std::memcpy(out, kMappedHead, 12);
        std::memcpy(out + 12, ip.bytes, 4);
        bits += 96;
    } else {
        std::memcpy(out, ip.bytes, 16);
    }
    out[16] = static_cast<unsigned char>(bits);
    return host_bits_clear(out) ? CidrParse::kOk : CidrParse::kHostBits;
}

std::string cidr_text(const unsigned char entry[kCidrEntryBytes]) {
    char buf[INET6_ADDRSTRLEN];
    unsigned bits = entry[16];
    if (bits >= 96 && is_mapped(entry)) {
        inet_ntop(AF_INET, entry + 12, buf, sizeof buf);
        bits -= 96;
    } else {
        inet_ntop(AF_INET6, entry, buf, sizeof buf);
    }
    return std::string(buf) + "/" + std::to_string(bits);
}

bool pack_allowed_ips(const std::vector<std::string> &texts, std::string &packed, std::string &error) {
    packed.clear();
    if (texts.empty() || texts.size() > kMaxAllowedIps) {
        error = "must hold 1 to " + std::to_string(kMaxAllowedIps) + " CIDRs";
        return false;
    }
    for (const std::string &t : texts) {
        unsigned char entry[kCidrEntryBytes];
        const CidrParse r = parse_cidr(t, entry);
        if (r != CidrParse::kOk) {
            // the entry is the caller's own text, bounded so an error stays short
            const std::string shown = t.size() > 64 ? t.substr(0, 64) + "..." : t;
            error = r == CidrParse::kHostBits
                        ? "\"" + shown + "\" has bits set past its prefix length; write the network (" +
                              "for example 10.0.0.0/8)"
                        : "\"" + shown + "\" is not an IPv4 or IPv6 address or CIDR";
            packed.clear();
            return false;
        }
        const std::string_view e(reinterpret_cast<const char *>(entry), kCidrEntryBytes);
        bool seen = false;
        for (size_t off = 0; off < packed.size(); off += kCidrEntryBytes)
            seen = seen || std::string_view(packed).substr(off, kCidrEntryBytes) == e;
        if (!seen) packed.append(e);
    }
    return true;
}

std::vector<std::string> allowed_ips_text(std::string_view packed) {
    std::vector<std::string> out;
    for (size_t off = 0; off + kCidrEntryBytes <= packed.size(); off += kCidrEntryBytes)
        out.push_back(cidr_text(reinterpret_cast<const unsigned char *>(packed.data() + off)));
    return out;
}

bool allowed_ips_ok(std::string_view packed) noexcept {
    if (packed.empty() || packed.size() % kCidrEntryBytes != 0 ||
        packed.size() / kCidrEntryBytes > kMaxAllowedIps)
        return false;
    for (size_t off = 0; off < packed.size(); off += kCidrEntryBytes) {
        const auto *e = reinterpret_cast<const unsigned char *>(packed.data() + off);
        if (e[16] > 128 || !host_bits_clear(e)) return false;
    }
    return true;
}

bool client_address(const sockaddr *client, unsigned char out[16]) noexcept {
    if (client == nullptr) return false;
    if (client->sa_family == AF_INET) {
        sockaddr_in sin;
        std::memcpy(&sin, client, sizeof sin);
        std::memcpy(out, kMappedHead, 12);
        std::memcpy(out + 12, &sin.sin_addr, 4);
        return true;
    }
    if (client->sa_family == AF_INET6) {
        sockaddr_in6 sin6;
        std::memcpy(&sin6, client, sizeof sin6);
        std::memcpy(out, &sin6.sin6_addr, 16);
        return true;
    }
    return false;
}

namespace {

// The network mask of each prefix length as bytes in address order, read
// as two native words: an entry fits with two loads, two XORs and two ANDs,
// whatever the byte order, and no shift or branch on the prefix length
// (a 32-entry list stays well under a microsecond: bench/RESULTS.md).
// A row for every byte value, so that the length byte indexes it as it is
// (one past 128 never passes decoding; it would read as 128).
struct MaskTable {
    uint64_t words[256][2];
    MaskTable() {
        for (unsigned bits = 0; bits < 256; bits++) {
            unsigned char m[16] = {};
            for (unsigned i = 0; i < bits && i < 128; i++) m[i / 8] |= static_cast<unsigned char>(0x80 >> (i % 8));
            std::memcpy(words[bits], m, 16);
        }
    }
};
const MaskTable kMasks;

}  // namespace

bool allowed_ips_fit(std::string_view packed, const unsigned char addr[16]) noexcept {
    if (packed.empty()) return true;
    uint64_t a[2];
    std::memcpy(a, addr, 16);
    const auto *e = reinterpret_cast<const unsigned char *>(packed.data());
    const unsigned char *end = e + packed.size() - packed.size() % kCidrEntryBytes;
    for (; e != end; e += kCidrEntryBytes) {
        uint64_t n[2];
        std::memcpy(n, e, 16);
        const uint64_t *m = kMasks.words[e[16]];
        if ((((n[0] ^ a[0]) & m[0]) | ((n[1] ^ a[1]) & m[1])) == 0) return true;
    }
    return false;
}

}  // namespace keyauth
