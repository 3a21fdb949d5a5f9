#include "options.h"

#include <cstdio>
#include <cstdlib>

#include "cli_values.h"
#include "program_usage.h"
#include "usage_source.h"
#include "webhook_signing.h"

namespace keyauthd {
namespace {

const char kUsage[] = R"(usage: keyauthd --db PATH [--usage-db PATH] --listen 127.0.0.1:PORT
                [--admin-listen 127.0.0.1:PORT] [--trusted-proxy ADDR] [--allow-remote]
       keyauthd --etcd URL[,URL...] --listen ADDR:PORT [--admin-listen ADDR:PORT] [...]

Serves the console key-management API (POST /v1/keys, GET /v1/keys,
POST /v1/keys/{id}/revoke) over HTTP. Put it behind nginx: see
nginx_conf/console_api.conf. Stops gracefully on SIGTERM or SIGINT: in-flight
requests finish and answer within 4.5 s, then the store is closed.

Limits: 4 workers with 64 queued requests (more: 503 SERVER_BUSY), 512
connections (more: 503), 100 header fields and 16 KiB of head (431), 64 KiB
bodies (413); 5 s for an idle keep-alive connection, 10 s for a request
head, its body (408) and its answer.

  --db PATH       LMDB environment directory (created if missing)
  --usage-db PATH the usage store the nginx workers write, where keyauthd
                  reads usage, lastUsedAt and what quotas used: nginx's
                  keyauth_usage_db (default, as nginx's: --db PATH + ".usage")
  --etcd URL[,URL...]
                  many-edge mode: the etcd cluster that holds the store,
                  instead of --db; keyauthd keeps no state, and any number
                  of them may serve. etcd unreachable: 503 STORE_UNAVAILABLE
  --etcd-prefix P the store's key prefix in etcd (default /keyauth/1)
  --etcd-cacert F, --etcd-cert F, --etcd-key F
                  TLS to https:// members: the CA to verify them with, and a
                  client certificate and key for members that ask for one
  --listen ADDR   loopback address and port to listen on, e.g. 127.0.0.1:8081
  --admin-listen ADDR
                  the admin API's own listener (/v1/admin/..., for your own
                  services, with admin tokens: keyauthctl admin-token
                  create), e.g. 127.0.0.1:8082; off unless given. The
                  console listener never serves /v1/admin/; do not put it
                  behind a public nginx location. Same limits as --listen
  --trusted-proxy ADDR[,ADDR...]
                  the proxies (nginx) whose X-Real-IP header names the
                  client in the audit trail: IP addresses, e.g. 127.0.0.1
                  when nginx runs on this host. Default none: every request
                  is recorded from the address it came from, and an
                  X-Real-IP header is ignored (any local user could write
                  any address into it)
  --max-connections N
                  open connections at most (default 512); one more is
                  answered 503 SERVER_BUSY and closed
  --allow-remote  allow a --listen or --admin-listen address other than
                  loopback (the console API is meant to sit behind nginx on
                  the same host; the admin API to be reached by your
                  services over a private network you trust)
  --webhook-key-file F
                  the deployment's webhook key (64 hex digits, mode 0600),
                  which every endpoint's signing secret is derived from; the
                  store holds no secret. Default with --db: PATH/webhook.key,
                  made if missing; with --etcd give the same file to every
                  keyauthd and to keyauthctl (without it nothing is sent)
  --webhook-ca-file F
                  more trust anchors (PEM) for receivers' certificates,
                  beside the system's: a private CA. Certificates are always
                  verified
  --webhook-allow-private
                  let webhooks reach loopback, private, link-local and
                  unique-local addresses (a lab, tests); refused by default
                  on the address actually dialled
  --webhook-lease-seconds N
                  with --etcd: the TTL of the lease that makes one keyauthd
                  the sender (default 10, 2 to 300); when it dies another
                  takes over within it
  --webhook-timeout S
                  an attempt's whole time, connecting to answer (default
                  10, 1 to 10): a receiver that takes longer has failed it
  --webhook-scan-seconds S
                  how often quota thresholds and keys about to expire are
                  looked for (default 60, 1 to 3600), when an endpoint wants
                  quota.threshold or key.expiring
  --github-keys-url URL
                  where GitHub's secret scanning signing keys are read
                  (default https://api.github.com/meta/public_keys/secret_scanning),
                  on the first report, never at start; again at most once
                  a minute when a report names a key not yet known
  --github-keys-file F
                  read those keys from this file instead (GitHub's JSON
                  layout): a host that must not reach GitHub
  --leak-action revoke|notify
                  what a key reported as leaked gets (POST
                  /v1/secret-scanning/github, POST /v1/admin/keys/report-leak):
                  revoked at once (default), or only recorded, audited and
                  announced (key.leaked). Admin and console tokens are
                  always revoked
  --map-size MIB  the map to start with: at least this, and never less than
                  the store was last written with (default: as written, 4096
                  for a new store; the file is sparse). A write that fills it
                  doubles it, as far as the disk's free space allows; past
                  that, creates answer 507 STORE_FULL.
)";

const keyauth::ProgramUsage kCli("keyauthd", kUsage);

}  // namespace

Options parse_options(int argc, char **argv) {
    Options o;
    std::string map_mib, max_conn, trusted;
    bool allow_remote = false;
    std::string lease, timeout, scan, keys_url, leak_action;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        if (a == "--allow-remote") {
            if (allow_remote) kCli.error(a + " given twice");
            allow_remote = true;
            continue;
        }
        if (a == "--webhook-allow-private") {
            if (o.webhook_allow_private) kCli.error(a + " given twice");
            o.webhook_allow_private = true;
            continue;
        }
        std::string *slot = a == "--db"                ? &o.db
                            : a == "--usage-db"        ? &o.usage_db
                            : a == "--etcd"            ? &o.etcd
                            : a == "--etcd-prefix"     ? &o.etcd_prefix
                            : a == "--etcd-cacert"     ? &o.etcd_cacert
                            : a == "--etcd-cert"       ? &o.etcd_cert
                            : a == "--etcd-key"        ? &o.etcd_key
                            : a == "--listen"          ? &o.listen
                            : a == "--admin-listen"    ? &o.admin_listen
                            : a == "--map-size"        ? &map_mib
                            : a == "--max-connections" ? &max_conn
                            : a == "--trusted-proxy"   ? &trusted
                            : a == "--webhook-key-file" ? &o.webhook_key_file
                            : a == "--webhook-ca-file" ? &o.webhook_ca_file
                            : a == "--webhook-lease-seconds" ? &lease
                            : a == "--webhook-timeout" ? &timeout
                            : a == "--webhook-scan-seconds" ? &scan
                            : a == "--github-keys-url" ? &keys_url
                            : a == "--github-keys-file" ? &o.github_keys_file
                            : a == "--leak-action"     ? &leak_action
                                                       : nullptr;
        if (slot == nullptr) kCli.error("unknown argument \"" + a + "\"");
        // an empty value is a missing one (it would read as "not given")
        if (i + 1 >= argc || argv[i + 1][0] == '\0') kCli.error(a + " needs a value");
        if (!slot->empty()) kCli.error(a + " given twice");
        *slot = argv[++i];
    }
    if (o.db.empty() == o.etcd.empty()) kCli.error("give --db PATH or --etcd URL[,URL...], one of them");
    if (o.etcd.empty() && !(o.etcd_prefix + o.etcd_cacert + o.etcd_cert + o.etcd_key).empty())
        kCli.error("--etcd-prefix and the --etcd TLS options need --etcd");
    if (!o.etcd.empty() && !map_mib.empty()) kCli.error("--map-size is for an LMDB store (--db), not etcd");
    if (!o.etcd.empty() && !o.usage_db.empty())
        kCli.error("--usage-db is for a single host (--db); with --etcd usage is read from etcd");
    if (o.etcd.empty() && o.usage_db.empty()) o.usage_db = keyauth::default_usage_dir(o.db);
    if (!keyauth::parse_host_port(o.listen, o.host, o.port)) {
        kCli.error("--listen needs HOST:PORT, e.g. 127.0.0.1:8081");
    }
    if (!allow_remote && !keyauth::is_loopback_address(o.host)) {
        kCli.error("--listen " + o.listen + " is not a loopback address; add --allow-remote if you mean it");
    }
    if (!o.admin_listen.empty()) {
        if (!keyauth::parse_host_port(o.admin_listen, o.admin_host, o.admin_port))
            kCli.error("--admin-listen needs HOST:PORT, e.g. 127.0.0.1:8082");
        if (!allow_remote && !keyauth::is_loopback_address(o.admin_host))
            kCli.error("--admin-listen " + o.admin_listen + " is not a loopback address; add --allow-remote if you mean it");
        if (o.admin_host == o.host && o.admin_port == o.port)
            kCli.error("--admin-listen must be another address than --listen");
    }
    if (!map_mib.empty()) o.map_size = kCli.bounded("--map-size", map_mib, 1, 1u << 20, "MiB") << 20;
    if (!trusted.empty() && !keyauth::parse_address_list(trusted, o.trusted_proxies))
        kCli.error("--trusted-proxy takes IP addresses separated by commas, e.g. 127.0.0.1");
    if (o.etcd.empty() && o.webhook_key_file.empty()) {
        o.webhook_key_file = keyauth::default_webhook_key_file(o.db);
        o.webhook_key_default = true;
    }
    if (!lease.empty()) {
        if (o.etcd.empty()) kCli.error("--webhook-lease-seconds is for --etcd (one host has one sender)");
        o.webhook_lease_seconds = kCli.bounded("--webhook-lease-seconds", lease, 2, 300, "seconds");
    }
    if (!timeout.empty()) o.webhook_timeout_seconds = kCli.bounded("--webhook-timeout", timeout, 1, 10, "seconds");
    if (!scan.empty()) o.webhook_scan_seconds = kCli.bounded("--webhook-scan-seconds", scan, 1, 3600, "seconds");
    if (!keys_url.empty()) {
        if (!o.github_keys_file.empty()) kCli.error("give --github-keys-url or --github-keys-file, not both");
        if (keys_url.rfind("https://", 0) != 0 && keys_url.rfind("http://", 0) != 0)
            kCli.error("--github-keys-url needs an https:// (or http://) URL");
        o.github_keys_url = keys_url;
    }
    if (!leak_action.empty()) {
        if (leak_action != "revoke" && leak_action != "notify") kCli.error("--leak-action takes revoke or notify");
        o.leak_notify = leak_action == "notify";
    }
    if (!max_conn.empty()) o.max_connections = kCli.bounded("--max-connections", max_conn, 1, 65536, "a number");
    return o;
}

}  // namespace keyauthd
