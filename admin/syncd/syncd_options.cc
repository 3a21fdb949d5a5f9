#include "syncd_options.h"

#include <boost/asio/ip/address.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "etcd_client.h"
#include "etcd_keyspace.h"

namespace keyauth::syncd {
namespace {

const char kUsage[] = R"(usage: keyauth-syncd --etcd URL[,URL...] --db PATH [--metrics 127.0.0.1:PORT]
                     [--allow-remote] [--etcd-prefix /keyauth/1] [--map-size MIB]
                     [--etcd-cacert FILE] [--etcd-cert FILE --etcd-key FILE]

Mirrors the keyauth records under an etcd prefix into this edge host's LMDB
store, which the nginx module reads: the only writer of that store. Rebuilds
it from a snapshot (beside the live copy, swapped in atomically) when it is
new, from another cluster, or behind a compaction; then follows etcd's watch.
Stops on SIGTERM or SIGINT. docs/scale-out.md describes it.

  --etcd URLS       etcd members, comma-separated: http(s)://HOST:PORT
  --db PATH         the edge's LMDB environment directory
  --metrics ADDR    serve GET /metrics (Prometheus) and GET /healthz on this
                    loopback address and port, e.g. 127.0.0.1:9187
  --allow-remote    allow a --metrics address other than loopback
  --etcd-prefix P   the etcd prefix to mirror (default /keyauth/1)
  --map-size MIB    the most the store may grow to: at least this, and never
                    less than it was last written with (default: as written,
                    4096 for a new store; the file is sparse)
  --etcd-cacert F   CA bundle to verify https:// members with
  --etcd-cert F     client certificate for members that require one
  --etcd-key F      its private key
)";

[[noreturn]] void usage_error(const std::string &msg) {
    std::cerr << "keyauth-syncd: " << msg << "\n\n" << kUsage;
    std::exit(2);
}

bool parse_listen(const std::string &spec, std::string &host, int &port) {
    size_t colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    host = spec.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);  // [::1]:9187
    }
    const char *b = spec.data() + colon + 1, *e = spec.data() + spec.size();
    auto [p, ec] = std::from_chars(b, e, port);
    return ec == std::errc() && p == e && port > 0 && port < 65536;
}

bool is_address(const std::string &host, bool &loopback) {
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    loopback = !ec && address.is_loopback();
    return !ec;
}

size_t bounded(const std::string &option, const std::string &text, size_t lo, size_t hi,
               const char *unit) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || v < lo || v > hi) {
        usage_error(option + " takes " + unit + " from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
    }
    return v;
}

}  // namespace

Options parse_options(int argc, char **argv) {
    Options o;
    std::string etcd, map_mib, prefix;
    bool allow_remote = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (a == "--allow-remote") {
            if (allow_remote) usage_error(a + " given twice");
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
                                                    : nullptr;
        if (slot == nullptr) usage_error("unknown argument \"" + a + "\"");
        if (i + 1 >= argc) usage_error(a + " needs a value");
        if (!slot->empty()) usage_error(a + " given twice");
        *slot = argv[++i];
        if (slot->empty()) usage_error(a + " needs a non-empty value");
    }
    if (etcd.empty()) usage_error("--etcd URL[,URL...] is required");
    std::string error;
    if (!etcd::parse_endpoints(etcd, o.etcd, error)) usage_error("--etcd: " + error);
    if (o.db.empty()) usage_error("--db PATH is required");
    if (!prefix.empty()) {
        if (!valid_etcd_prefix(prefix, error)) usage_error("--etcd-prefix: " + error);
        o.prefix = prefix;
    }
    if (!o.metrics.empty()) {
        bool loopback = false;
        if (!parse_listen(o.metrics, o.metrics_host, o.metrics_port) ||
            !is_address(o.metrics_host, loopback)) {
            usage_error("--metrics needs IP:PORT, e.g. 127.0.0.1:9187");
        }
        if (!allow_remote && !loopback) {
            usage_error("--metrics " + o.metrics +
                        " is not a loopback address; add --allow-remote if you mean it");
        }
    }
    if (o.etcd_cert.empty() != o.etcd_key.empty()) {
        usage_error("--etcd-cert and --etcd-key go together");
    }
    if (!map_mib.empty()) o.map_size = bounded("--map-size", map_mib, 1, 1u << 20, "MiB") << 20;
    return o;
}

}  // namespace keyauth::syncd
