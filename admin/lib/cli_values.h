// Values the daemons' command lines share (keyauthd, keyauth-syncd): a
// listen address and a bounded number. Each program words its own usage
// error around a false or empty answer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace keyauth {

// "HOST:PORT" or "[IPv6]:PORT" (brackets removed from host); port 1-65535.
bool parse_host_port(const std::string &spec, std::string &host, int &port);

// An IP address literal (never a name: "localhost" is not taken on trust).
bool is_ip_address(const std::string &host);
bool is_loopback_address(const std::string &host);

// The one text of an IP address literal, so that addresses compare as
// strings: "::0001" is "::1", an IPv4-mapped "::ffff:127.0.0.1" is
// "127.0.0.1". Empty for anything else.
std::string canonical_address(const std::string &host);

// "ADDR[,ADDR...]" of IP literals, each canonical; false (out untouched) if
// an element is empty or not an address.
bool parse_address_list(const std::string &spec, std::vector<std::string> &out);

// "A,B,C" as its elements, empty ones kept (for the caller to refuse).
std::vector<std::string> split_commas(const std::string &spec);

// A whole decimal number from lo to hi, nothing else.
std::optional<size_t> parse_bounded(const std::string &text, size_t lo, size_t hi);

}  // namespace keyauth
