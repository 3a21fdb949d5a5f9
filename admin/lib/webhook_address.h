// Which addresses a webhook delivery may connect to (issue #46 item 5, "No
// SSRF"). Called on the address libcurl is about to dial, from its
// CURLOPT_OPENSOCKETFUNCTION (webhook_http.cc): the check and the connect
// see the same bytes, so a DNS answer that changes in between cannot slip
// a private address past it.
#pragma once

#include <sys/socket.h>

#include <string>

namespace keyauth {

// The IANA special-purpose class of the address (src/core/ip_address.h's
// parse_ip: "global", "loopback", "private", ...) decides; an IPv4-mapped
// IPv6 address (::ffff:a.b.c.d) is classed by the IPv4 address it carries,
// because that is where the kernel sends it.
//
// allow_private false (the default of keyauthd): only "global" is allowed.
// Refused: loopback, private (RFC 1918), link-local (169.254/16 with the
// cloud metadata address 169.254.169.254, fe80::/10), unique-local
// (fc00::/7), shared (100.64/10), unspecified, this-network, broadcast,
// multicast, documentation, benchmarking, IETF protocol assignments,
// 6to4, Teredo, IPv4/IPv6 translation (64:ff9b::/96, 64:ff9b:1::/48),
// ORCHID, discard-only and reserved space.
//
// allow_private true (--webhook-allow-private: tests, labs): every unicast
// class is allowed; still refused are the addresses no single host answers:
// unspecified (0.0.0.0 and :: reach this host on Linux, never what a URL
// meant), this-network (0/8), broadcast and multicast.
//
// Any family but AF_INET/AF_INET6, or a length too short for its family,
// is refused. On refusal `why` names the address and its class, e.g.
// "127.0.0.1 is loopback" or "::ffff:10.0.0.1 is private": the dialled
// address only, nothing of the URL, headers or body. On success `why` is
// left empty.
bool webhook_address_allowed(const sockaddr *sa, socklen_t len, bool allow_private, std::string &why);

}  // namespace keyauth
