// allowedIps of keys and accounts (DESIGN, *Restrictions and metadata*):
// 1 to 32 CIDRs a call's client address must fit. Stored packed, 17 bytes
// an entry: the network in IPv6 form (an IPv4 network as ::ffff:a.b.c.d,
// its prefix length + 96), then the prefix length 0..128. One form for both
// families means one comparison at the edge, and an IPv4 client reached
// over an IPv6 socket (::ffff:10.1.2.3) fits the IPv4 entries as it should.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "keyauth_schema.h"

struct sockaddr;

namespace keyauth {

constexpr size_t kCidrEntryBytes = KA_CIDR_ENTRY_BYTES;
constexpr size_t kMaxAllowedIps = KA_ALLOWED_IPS_MAX;

enum class CidrParse {
    kOk,
    kSyntax,    // not ADDRESS or ADDRESS/BITS
    kHostBits,  // bits set past the prefix: "10.1.2.3/8" is refused, never widened
};

// One CIDR ("10.0.0.0/8", "2001:db8::/32", or an address alone: /32, /128)
// as its 17 packed bytes.
CidrParse parse_cidr(std::string_view text, unsigned char out[kCidrEntryBytes]) noexcept;

// The canonical text of a packed entry: dotted quad for IPv4, RFC 5952 for IPv6,
// always with its prefix length.
std::string cidr_text(const unsigned char entry[kCidrEntryBytes]);

// Texts as given → a packed list: each parsed, exact duplicates dropped, order
// kept. Empty result with `error` set (naming the entry) on the first bad one,
// or when there are none or more than kMaxAllowedIps.
bool pack_allowed_ips(const std::vector<std::string> &texts, std::string &packed, std::string &error);
std::vector<std::string> allowed_ips_text(std::string_view packed);

// True if packed is a list a record may hold: 1..32 whole entries, each with a
// prefix length ≤ 128 and no bit set past it.
bool allowed_ips_ok(std::string_view packed) noexcept;

// The client address in the packed form (IPv4 as ::ffff:a.b.c.d); false for a
// family other than AF_INET and AF_INET6, or a null address.
bool client_address(const sockaddr *client, unsigned char out[16]) noexcept;

// True if addr fits an entry of the packed list (an empty list fits anything).
bool allowed_ips_fit(std::string_view packed, const unsigned char addr[16]) noexcept;

}  // namespace keyauth
