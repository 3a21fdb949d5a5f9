// keyauth-syncd's command line. Anything it does not know, a value missing or
// out of range, or an option given twice is a usage error: exit 2 with the
// usage.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace keyauth::syncd {

struct Options {
    std::vector<std::string> etcd;  // endpoints, as parsed from --etcd
    std::string db;
    std::string metrics;       // as given, for messages; empty: no HTTP listener
    std::string metrics_host;  // brackets of an IPv6 address removed
    int metrics_port = 0;
    std::string prefix = "/keyauth/1";
    std::string etcd_cacert, etcd_cert, etcd_key;
    size_t map_size = 0;  // bytes; 0: as the store was written
    std::string usage_db;  // default: db + ".usage"
    std::chrono::milliseconds usage_interval{15000};
    uint32_t usage_history_days = 400;  // day buckets kept in etcd (usage_publisher.h)
    std::chrono::milliseconds quota_interval{1000};  // the quota exchange's (quota_exchange.h)
    std::string quota_redis;  // as given; empty: the exchange goes through etcd only
    std::string quota_redis_host, quota_redis_user;
    int quota_redis_port = 6379;
    std::chrono::milliseconds quota_redis_interval{200};  // quota_redis.h
    std::chrono::milliseconds max_lag{10000};  // /healthz answers 503 past it
    // GET /snapshot (snapshot_service.h); empty: not served
    std::string snapshot_listen, snapshot_host;
    int snapshot_port = 0;
    std::string snapshot_allow;  // packed (ip_allowlist.h)
    std::chrono::milliseconds snapshot_timeout{10000};
    std::vector<std::string> bootstrap_from;  // peers' /snapshot URLs
};

// `keyauth-syncd --snapshot-copy DIR`: the process GET /snapshot runs for
// each copy (snapshot_copy.h); true with DIR when argv is exactly that.
bool snapshot_copy_mode(int argc, char **argv, std::string &dir);

// Exits 0 after printing the usage for -h/--help, 2 on a usage error.
Options parse_options(int argc, char **argv);

}  // namespace keyauth::syncd
