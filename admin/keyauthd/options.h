// keyauthd's command line. Anything it does not know, a value missing or out
// of range, or an option given twice is a usage error: exit 2 with the usage.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace keyauthd {

struct Options {
    std::string db;    // single host: the LMDB store
    std::string usage_db;  // single host: the edge's usage store (default db + ".usage")
    std::string etcd;  // many edges: the etcd endpoints (exactly one of the two)
    std::string etcd_prefix, etcd_cacert, etcd_cert, etcd_key;
    std::string listen;  // as given, for messages
    std::string host;    // brackets of an IPv6 address removed
    int port = 0;
    // the admin API's own listener (empty: none)
    std::string admin_listen, admin_host;
    int admin_port = 0;
    size_t map_size = 0;         // bytes; 0: as the store was written
    size_t max_connections = 0;  // 0: the server's default
    // peers whose X-Real-IP is recorded as the client's address (canonical);
    // empty: every request is recorded from its peer
    std::vector<std::string> trusted_proxies;
};

// Exits 0 after printing the usage for -h/--help, 2 on a usage error.
Options parse_options(int argc, char **argv);

}  // namespace keyauthd
