// Loopback ports for the real servers tests start (etcd, redis-server).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace keyauth::testing {

// Ports that were free a moment ago, all distinct: each is held open
// until every one is chosen.
inline std::vector<int> free_ports(int count) {
    std::vector<int> fds, ports;
    for (int i = 0; i < count; ++i) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
            ports.push_back(0);
        } else {
            ports.push_back(ntohs(a.sin_port));
        }
        fds.push_back(fd);
    }
    for (int fd : fds) {
        if (fd >= 0) close(fd);
    }
    return ports;
}

}  // namespace keyauth::testing
