// A client address as nginx hands it to the edge (sockaddr_in or
// sockaddr_in6), from its text; for the allowedIps tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace keyauth::testing {

inline sockaddr_storage client_sockaddr(const char *text) {
    sockaddr_storage ss{};
    if (std::strchr(text, ':') == nullptr) {
        auto *in = reinterpret_cast<sockaddr_in *>(&ss);
        in->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &in->sin_addr) != 1) throw std::invalid_argument(text);
    } else {
        auto *in6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        in6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &in6->sin6_addr) != 1) throw std::invalid_argument(text);
    }
    return ss;
}

}  // namespace keyauth::testing
