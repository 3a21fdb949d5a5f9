#include "syncd_options.h"

#include "keyauth_schema.h"

#include <cstdio>
#include <cstdlib>

#include "cli_values.h"
#include "program_usage.h"

#include "etcd_client.h"
#include "etcd_keyspace.h"
#include "ip_allowlist.h"
#include "quota_redis.h"

namespace keyauth::syncd {
namespace {

const char kUsage[] = R"(usage: keyauth-syncd --etcd URL[,URL...] --db PATH [--metrics 127.0.0.1:PORT]
                     [--allow-remote] [--etcd-prefix /keyauth/1] [--map-size MIB]
                     [--etcd-cacert FILE] [--etcd-cert FILE --etcd-key FILE]
                     [--usage-db PATH] [--usage-interval SECONDS] [--usage-history DAYS]
                     [--quota-interval MS]
                     [--quota-redis redis://[USER@]HOST[:PORT]]
                     [--quota-redis-interval MS] [--max-lag SECONDS]
                     [--snapshot-listen IP:PORT [--snapshot-allow CIDR[,CIDR...]]
                      [--snapshot-timeout SECONDS]] [--bootstrap-from URL[,URL...]]
       keyauth-syncd --snapshot-copy PATH

Mirrors the keyauth records under an etcd prefix into this edge host's LMDB
store, which the nginx module reads: the only writer of that store. Rebuilds
it from a snapshot (beside the live copy, swapped in atomically) when it is
new, from another cluster, or behind a compaction; then follows etcd's watch.
Also publishes this edge's per-key usage (what the nginx workers collect in
the usage env) to etcd, where keyauthd sums every edge's, and exchanges
quota use with the other edges: publishes what this edge charged to each
key's and account's quota, and counts the other edges' at this edge.
Stops on SIGTERM or SIGINT. docs/scale-out.md describes it.

  --etcd URLS       etcd members, comma-separated: http(s)://HOST:PORT
  --db PATH         the edge's LMDB environment directory
  --metrics ADDR    serve GET /metrics (Prometheus) and GET /healthz on this
                    loopback address and port, e.g. 127.0.0.1:9187
  --allow-remote    allow a --metrics address other than loopback
  --etcd-prefix P   the etcd prefix to mirror (default /keyauth/1)
  --map-size MIB    the map to start with: at least this, and never less
                    than the store was last written with (default: as
                    written, 4096 for a new store; the file is sparse); a
                    batch that fills it doubles it, as far as the disk allows
  --etcd-cacert F   CA bundle to verify https:// members with
  --etcd-cert F     client certificate for members that require one
  --etcd-key F      its private key
  --usage-db PATH   the edge's usage env, written by nginx (default: --db
                    PATH + ".usage", nginx's default too)
  --usage-interval S  publish the usage that changed every S seconds, 1 to
                    30 (default 15)
  --usage-history D keep D days of usage day buckets in etcd, 1 to 3660
                    (default 400; hour buckets are kept 7 days): older ones
                    are deleted once an hour, by every edge (idempotent)
  --quota-interval MS  exchange quota use with the other edges every MS
                    milliseconds, 100 to 30000 (default 1000); the fleet's
                    overshoot of a quota grows with it (docs/scale-out.md)
  --quota-redis URL also exchange quota use through this Redis (the one
                    nginx's keyauth_shared_limits uses), sooner than etcd:
                    redis://[USER@]HOST[:PORT]; the password, if any, from
                    the environment variable KEYAUTH_SYNCD_REDIS_PASSWORD
  --quota-redis-interval MS  do so every MS milliseconds, 50 to 5000
                    (default 200); the overshoot grows with it
  --max-lag S       GET /healthz answers 503 once the edge has not known
                    itself current (every change in etcd applied) for more
                    than S seconds, 1 to 3600 (default 10), and while a
                    record cannot be applied
  --snapshot-listen ADDR  serve GET /snapshot on IP:PORT: a consistent,
                    compacted copy of this edge's store for a new edge to
                    start from (--bootstrap-from), one at a time, only while
                    /healthz would answer 200. Keep it on the fleet's
                    private network
  --snapshot-allow CIDRS  the peers that may fetch it, up to 32 (default:
                    loopback only; required for another address)
  --snapshot-timeout S  drop a client that takes less than a 1 MiB piece
                    in S seconds, 1 to 600 (default 10)
  --bootstrap-from URLS  peers' http://IP:PORT/snapshot, comma-separated:
                    when the store must be built (new, another cluster,
                    behind a compaction), copy a peer's first, trying each
                    in turn, then etcd. A copy is checked (checksum, cluster,
                    schema, revision still in etcd) before it is swapped in
  --snapshot-copy PATH  write the copy GET /snapshot sends of the store at
                    PATH to standard output (one head line, then data.mdb):
                    what the listener runs for each copy
)";

const keyauth::ProgramUsage kCli("keyauth-syncd", kUsage);

void parse_snapshot_options(Options &o, const std::string &allow, const std::string &timeout,
                            const std::string &bootstrap) {
    if (!o.snapshot_listen.empty()) {
        if (!keyauth::parse_host_port(o.snapshot_listen, o.snapshot_host, o.snapshot_port) ||
            !keyauth::is_ip_address(o.snapshot_host)) {
            kCli.error("--snapshot-listen needs IP:PORT, e.g. 10.0.0.5:9188");
        }
        if (allow.empty() && !keyauth::is_loopback_address(o.snapshot_host)) {
            kCli.error("--snapshot-listen " + o.snapshot_listen +
                       " is not a loopback address: name the peers that may fetch snapshots with --snapshot-allow");
        }
        std::string error;
        if (!pack_allowed_ips(keyauth::split_commas(allow.empty() ? "127.0.0.0/8,::1" : allow), o.snapshot_allow, error)) {
            kCli.error("--snapshot-allow: " + error);
        }
    } else if (!allow.empty() || !timeout.empty()) {
        kCli.error(std::string(allow.empty() ? "--snapshot-timeout" : "--snapshot-allow") +
                   " needs --snapshot-listen");
    }
    if (!timeout.empty()) {
        o.snapshot_timeout = std::chrono::seconds(kCli.bounded("--snapshot-timeout", timeout, 1, 600, "seconds"));
    }
    if (!bootstrap.empty()) {
        o.bootstrap_from = keyauth::split_commas(bootstrap);
        if (o.bootstrap_from.size() > 16) kCli.error("--bootstrap-from: at most 16 URLs");
        for (const std::string &url : o.bootstrap_from) {
            if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
                kCli.error("--bootstrap-from: \"" + url + "\" is not an http:// or https:// URL");
            }
        }
    }
}

}  // namespace

bool snapshot_copy_mode(int argc, char **argv, std::string &dir) {
    if (argc != 3 || std::string(argv[1]) != "--snapshot-copy") return false;
    dir = argv[2];
    return true;
}

Options parse_options(int argc, char **argv) {
    Options o;
    std::string etcd, map_mib, prefix, usage_interval, usage_history, quota_interval, quota_redis_interval, max_lag;
    std::string snapshot_allow, snapshot_timeout, bootstrap_from;
    bool allow_remote = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (a == "--snapshot-copy") kCli.error("--snapshot-copy PATH is a command of its own: no other option");
        if (a == "--allow-remote") {
            if (allow_remote) kCli.error(a + " given twice");
            allow_remote = true;
            continue;
        }
        std::string *slot = a == "--etcd"           ? &etcd
                            : a == "--db"           ? &o.db
                            : a == "--metrics"      ? &o.metrics
                            : a == "--etcd-prefix"  ? &prefix
                            : a == "--map-size"     ? &map_mib
                            : a == "--etcd-cacert"  ? &o.etcd_cacert
                            : a == "--etcd-cert"    ? &o.etcd_cert
                            : a == "--etcd-key"     ? &o.etcd_key
                            : a == "--usage-db"     ? &o.usage_db
                            : a == "--usage-interval" ? &usage_interval
                            : a == "--usage-history" ? &usage_history
                            : a == "--quota-interval" ? &quota_interval
                            : a == "--quota-redis"  ? &o.quota_redis
                            : a == "--quota-redis-interval" ? &quota_redis_interval
                            : a == "--max-lag"      ? &max_lag
                            : a == "--snapshot-listen" ? &o.snapshot_listen
                            : a == "--snapshot-allow" ? &snapshot_allow
                            : a == "--snapshot-timeout" ? &snapshot_timeout
                            : a == "--bootstrap-from" ? &bootstrap_from
                                                    : nullptr;
        if (slot == nullptr) kCli.error("unknown argument \"" + a + "\"");
        if (i + 1 >= argc) kCli.error(a + " needs a value");
        if (!slot->empty()) kCli.error(a + " given twice");
        *slot = argv[++i];
        if (slot->empty()) kCli.error(a + " needs a non-empty value");
    }
    if (etcd.empty()) kCli.error("--etcd URL[,URL...] is required");
    std::string error;
    if (!etcd::parse_endpoints(etcd, o.etcd, error)) kCli.error("--etcd: " + error);
    if (o.db.empty()) kCli.error("--db PATH is required");
    if (!prefix.empty()) {
        if (!valid_etcd_prefix(prefix, error)) kCli.error("--etcd-prefix: " + error);
        o.prefix = prefix;
    }
    if (!o.metrics.empty()) {
        if (!keyauth::parse_host_port(o.metrics, o.metrics_host, o.metrics_port) ||
            !keyauth::is_ip_address(o.metrics_host)) {
            kCli.error("--metrics needs IP:PORT, e.g. 127.0.0.1:9187");
        }
        if (!allow_remote && !keyauth::is_loopback_address(o.metrics_host)) {
            kCli.error("--metrics " + o.metrics +
                        " is not a loopback address; add --allow-remote if you mean it");
        }
    }
    if (o.etcd_cert.empty() != o.etcd_key.empty()) {
        kCli.error("--etcd-cert and --etcd-key go together");
    }
    if (o.usage_db.empty()) o.usage_db = o.db + KA_USAGE_DIR_SUFFIX;
    if (!usage_interval.empty()) {
        o.usage_interval = std::chrono::seconds(kCli.bounded("--usage-interval", usage_interval, 1, 30, "seconds"));
    }
    if (!usage_history.empty()) {
        o.usage_history_days =
            static_cast<uint32_t>(kCli.bounded("--usage-history", usage_history, 1, 3660, "days"));
    }
    if (!quota_interval.empty()) {
        o.quota_interval = std::chrono::milliseconds(
            kCli.bounded("--quota-interval", quota_interval, 100, 30000, "milliseconds"));
    }
    if (!o.quota_redis.empty()) {
        QuotaRedisOptions r;
        if (!parse_quota_redis_url(o.quota_redis, r, error)) kCli.error("--quota-redis: " + error);
        o.quota_redis_host = r.host;
        o.quota_redis_port = r.port;
        o.quota_redis_user = r.user;
    }
    if (!quota_redis_interval.empty()) {
        if (o.quota_redis.empty()) kCli.error("--quota-redis-interval needs --quota-redis");
        o.quota_redis_interval = std::chrono::milliseconds(
            kCli.bounded("--quota-redis-interval", quota_redis_interval, 50, 5000, "milliseconds"));
    }
    if (!max_lag.empty()) o.max_lag = std::chrono::seconds(kCli.bounded("--max-lag", max_lag, 1, 3600, "seconds"));
    parse_snapshot_options(o, snapshot_allow, snapshot_timeout, bootstrap_from);
    if (!map_mib.empty()) o.map_size = kCli.bounded("--map-size", map_mib, 1, 1u << 20, "MiB") << 20;
    return o;
}

}  // namespace keyauth::syncd
