#include "cli_values.h"

#include <boost/asio/ip/address.hpp>

#include <charconv>

namespace keyauth {

bool parse_host_port(const std::string &spec, std::string &host, int &port) {
    size_t colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    host = spec.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);  // [::1]:8081
    }
    const char *b = spec.data() + colon + 1, *e = spec.data() + spec.size();
    auto [p, ec] = std::from_chars(b, e, port);
    return ec == std::errc() && p == e && port > 0 && port < 65536;
}

bool is_ip_address(const std::string &host) {
    boost::system::error_code ec;
    boost::asio::ip::make_address(host, ec);
    return !ec;
}

bool is_loopback_address(const std::string &host) {
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    return !ec && address.is_loopback();
}

std::string canonical_address(const std::string &host) {
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    if (ec) return {};
    if (address.is_v6() && address.to_v6().is_v4_mapped())
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6()).to_string();
    return address.to_string();
}

bool parse_address_list(const std::string &spec, std::vector<std::string> &out) {
    std::vector<std::string> list;
    size_t start = 0;
    while (true) {
        size_t comma = spec.find(',', start);
        std::string one = canonical_address(spec.substr(start, comma - start));
        if (one.empty()) return false;
        list.push_back(std::move(one));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    out = std::move(list);
    return true;
}

std::optional<size_t> parse_bounded(const std::string &text, size_t lo, size_t hi) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v < lo || v > hi) return std::nullopt;
    return v;
}

std::vector<std::string> split_commas(const std::string &spec) {
    std::vector<std::string> out;
    size_t start = 0;
    for (;;) {
        const size_t comma = spec.find(',', start);
        out.push_back(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

}  // namespace keyauth
