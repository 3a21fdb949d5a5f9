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
    // webhooks (DESIGN, *Events and webhooks*): the deployment's key
    // (single host: default inside --db, made if missing; etcd: none unless
    // given, and then nothing is sent), the sender's TLS trust and SSRF
    // guard, and the sender's lease in etcd
    std::string webhook_key_file;
    bool webhook_key_default = false;  // the default path: made if missing
    std::string webhook_ca_file;
    bool webhook_allow_private = false;
    size_t webhook_lease_seconds = 10;
    size_t webhook_timeout_seconds = 10;
    size_t webhook_scan_seconds = 60;
    // GitHub's secret scanning (DESIGN, *Leaked keys revoke themselves*):
    // where its signing keys are read (a URL, or a file instead), and what
    // a reported key of this deployment gets
    std::string github_keys_url = "https://api.github.com/meta/public_keys/secret_scanning";
    std::string github_keys_file;
    bool leak_notify = false;  // --leak-action notify; default revoke
};

// Exits 0 after printing the usage for -h/--help, 2 on a usage error.
Options parse_options(int argc, char **argv);

}  // namespace keyauthd
