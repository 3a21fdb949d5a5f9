#include "webhook_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string_view>

#include "ip_address.h"

namespace keyauth {
namespace {

// The classes no single host answers, refused even with allow_private.
bool never_a_host(std::string_view type) {
    return type == "unspecified" || type == "this-network" || type == "broadcast" || type == "multicast";
}

// The dialled bytes as parse_ip sees text: the kernel's own formatting
// (inet_ntop) of bytes, then the one IANA classification keyauth has.
bool classify(int family, const void *bytes, IpInfo &info) {
    char text[INET6_ADDRSTRLEN];
    if (inet_ntop(family, bytes, text, sizeof text) == nullptr) return false;
    return parse_ip(text, info);
}

}  // namespace

bool webhook_address_allowed(const sockaddr *sa, socklen_t len, bool allow_private, std::string &why) {
    why.clear();
    IpInfo info{};
    bool parsed = false;
    if (sa != nullptr && sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
        sockaddr_in v4;
        std::memcpy(&v4, sa, sizeof v4);
        parsed = classify(AF_INET, &v4.sin_addr, info);
    } else if (sa != nullptr && sa->sa_family == AF_INET6 &&
               len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
        sockaddr_in6 v6;
        std::memcpy(&v6, sa, sizeof v6);
        parsed = classify(AF_INET6, &v6.sin6_addr, info);
    } else {
        why = sa == nullptr ? std::string("no address")
                            : "address family " + std::to_string(sa->sa_family) + " is not IPv4 or IPv6";
        return false;
    }
    if (!parsed) {
        why = "the address could not be read";
        return false;
    }
    const std::string name = info.canonical;
    std::string_view type = info.type;
    if (type == "ipv4-mapped") {
        IpInfo embedded{};
        if (!classify(AF_INET, info.bytes + 12, embedded)) {
            why = name + " could not be read";
            return false;
        }
        type = embedded.type;
    }
    const bool allowed = type == "global" || (allow_private && !never_a_host(type));
    if (!allowed) why = name + " is " + std::string(type);
    return allowed;
}

}  // namespace keyauth
