// Values the daemons' command lines share (keyauthd, keyauth-syncd): a
// listen address and a bounded number. Each program words its own usage
// error around a false or empty answer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace keyauth {

// "HOST:PORT" or "[IPv6]:PORT" (brackets removed from host); port 1-65535.
bool parse_host_port(const std::string &spec, std::string &host, int &port);

// An IP address literal (never a name: "localhost" is not taken on trust).
bool is_ip_address(const std::string &host);
bool is_loopback_address(const std::string &host);

// A whole decimal number from lo to hi, nothing else.
std::optional<size_t> parse_bounded(const std::string &text, size_t lo, size_t hi);

}  // namespace keyauth
