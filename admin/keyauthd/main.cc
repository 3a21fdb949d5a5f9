// keyauthd: the console's key-management daemon. It serves /v1/keys over
// HTTP on loopback, behind nginx (nginx_conf/console_api.conf), and writes
// the LMDB store the edge reads. Every 2xx is sent after a durable commit.
//
//   keyauthd --db PATH [--usage-db PATH] --listen 127.0.0.1:PORT [--trusted-proxy ADDR[,ADDR...]]
//            [--max-connections N] [--allow-remote]
//   keyauthd --etcd URL[,URL...] --listen ADDR:PORT [...]
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "access_log.h"
#include "admin_api.h"
#include "console_api.h"
#include "console_metrics.h"
#include "http_server.h"
#include "leak_api.h"
#include "leak_report.h"
#include "no_core_dumps.h"
#include "options.h"
#include "etcd_backend.h"
#include "store.h"
#include "quota_usage.h"
#include "usage_source.h"
#include "webhook_metrics.h"
#include "webhook_role.h"

int main(int argc, char **argv) {
    keyauthd::Options opt = keyauthd::parse_options(argc, argv);
    keyauth::HttpServerLimits limits;
    if (opt.max_connections) limits.max_connections = opt.max_connections;

    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthd: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    try {
        std::unique_ptr<keyauth::StoreBackend> backend;
        if (!opt.etcd.empty()) {
            keyauth::EtcdBackendOptions eo;
            eo.endpoints = opt.etcd;
            if (!opt.etcd_prefix.empty()) eo.prefix = opt.etcd_prefix;
            eo.ca_file = opt.etcd_cacert;
            eo.cert_file = opt.etcd_cert;
            eo.key_file = opt.etcd_key;
            // a call of a console request has this long per etcd call, so
            // an answer comes well inside nginx's 10 s proxy timeout
            eo.request_timeout = std::chrono::seconds(3);
            std::string error;
            backend = keyauth::EtcdBackend::make(eo, error);
            if (!backend) {
                std::cerr << "keyauthd: --etcd: " << error << "\n";
                return 2;
            }
        } else {
            backend = std::make_unique<keyauth::LmdbBackend>(opt.db, opt.map_size);
        }
        keyauth::Store store(std::move(backend));
        // Well inside nginx's proxy_read_timeout (10 s in console_api.conf):
        // a create is never committed after the console has given up on it.
        store.set_write_wait_limit(std::chrono::seconds(5));
        // Usage is read where the edges put it: etcd (every edge's syncd
        // publishes there) or the usage store (--usage-db, beside --db by
        // default).
        keyauth::etcd::ClientOptions usage_etcd;
        if (!opt.etcd.empty()) {
            std::string error;
            keyauth::etcd::parse_endpoints(opt.etcd, usage_etcd.endpoints, error);
            usage_etcd.ca_file = opt.etcd_cacert;
            usage_etcd.cert_file = opt.etcd_cert;
            usage_etcd.key_file = opt.etcd_key;
            usage_etcd.request_timeout = std::chrono::seconds(3);
        }
        const std::string prefix =
            opt.etcd_prefix.empty() ? std::string(keyauth::kDefaultEtcdPrefix) : opt.etcd_prefix;
        std::unique_ptr<keyauth::UsageSource> usage = keyauth::make_usage_source(opt.usage_db, usage_etcd, prefix);
        std::unique_ptr<keyauth::QuotaUsageSource> quota_usage =
            keyauth::make_quota_usage_source(opt.usage_db, usage_etcd, prefix);
        keyauth::ConsoleApi api(store, usage.get(), quota_usage.get());
        // GitHub's secret scanning reports (public, through nginx): its
        // signing keys are read on the first report, never here
        keyauth::GithubKeysOptions github;
        github.url = opt.github_keys_url;
        github.file = opt.github_keys_file;
        keyauth::GithubKeys github_keys(github);
        const keyauth::LeakAction leak_action =
            opt.leak_notify ? keyauth::LeakAction::kNotify : keyauth::LeakAction::kRevoke;
        keyauth::SecretScanningApi scanning(store, github_keys, leak_action);
        limits.large_body_paths = {keyauth::SecretScanningApi::kGithubPath};
        limits.large_body = keyauth::kMaxLeakReportBytes;
        // GET /metrics on the same listener (the nginx configs proxy only
        // /v1/keys and /v1/audit, so it stays on loopback)
        keyauth::ConsoleMetrics metrics;
        store.set_write_observer([&metrics](double seconds) { metrics.observe_write(seconds); });
        keyauth::HttpServer server(
            [&api, &metrics, &store, &scanning](const keyauth::HttpRequest &r) {
                if (r.path == "/metrics") return metrics.handle(r, store);
                if (r.path == keyauth::SecretScanningApi::kGithubPath) return scanning.handle(r);
                return api.handle(r);
            },
            limits,
            [&metrics](const keyauth::ExchangeLog &x) {
                keyauth::log_exchange(x);
                metrics.observe_request(x.method, x.path, x.status, x.seconds);
            });
        server.trust_proxies(opt.trusted_proxies);
        std::string error;
        if (!server.bind(opt.host, opt.port, error)) {
            std::cerr << "keyauthd: cannot listen on " << opt.listen << ": " << error << "\n";
            return 1;
        }
        // The admin API on a listener of its own, with the same limits: the
        // console's never serves it, so no public nginx location exposes it
        keyauth::AdminApi admin(store, usage.get(), quota_usage.get());
        std::unique_ptr<keyauth::HttpServer> admin_server;
        if (!opt.admin_listen.empty()) {
            keyauth::HttpServerLimits admin_limits = limits;
            admin_limits.large_body_paths.clear();  // 64 KiB bodies everywhere
            admin_server = std::make_unique<keyauth::HttpServer>(
                [&admin](const keyauth::HttpRequest &r) { return admin.handle(r); }, admin_limits,
                [&metrics](const keyauth::ExchangeLog &x) {
                    keyauth::log_exchange(x);
                    metrics.observe_admin_request(x.method, keyauth::admin_route_template(x.path), x.status,
                                                  x.seconds);
                });
            admin_server->trust_proxies(opt.trusted_proxies);
            if (!admin_server->bind(opt.admin_host, opt.admin_port, error)) {
                std::cerr << "keyauthd: cannot listen on " << opt.admin_listen << ": " << error << "\n";
                return 1;
            }
            admin_server->fit_to_descriptors();
        }
        // webhooks: sent by this keyauthd when it has the deployment's key
        // (and, on many edges, holds the sender's lease in etcd)
        std::optional<keyauth::WebhookKey> webhook_key;
        std::string webhooks_off = "no --webhook-key-file: nothing is sent";
        if (!opt.webhook_key_file.empty()) {
            std::string key_error;
            webhook_key = opt.webhook_key_default ? keyauth::load_or_make_webhook_key(opt.webhook_key_file, key_error)
                                                  : keyauth::load_webhook_key(opt.webhook_key_file, key_error);
            if (!webhook_key && !opt.webhook_key_default) {
                std::cerr << "keyauthd: --webhook-key-file: " << key_error << "\n";
                return 1;
            }
            // the default key unusable: the console and admin API still
            // serve; nothing is sent, and the log and /metrics say so
            if (!webhook_key) webhooks_off = "webhook key: " + key_error;
        }
        admin.set_webhook_key(webhook_key);
        admin.set_leak_action(leak_action);
        std::unique_ptr<keyauthd::WebhookRole> webhooks;
        if (webhook_key) {
            keyauth::WebhookSenderOptions so;
            so.http.allow_private = opt.webhook_allow_private;
            so.http.ca_file = opt.webhook_ca_file;
            so.http.timeout = std::chrono::seconds(opt.webhook_timeout_seconds);
            so.watch_every = std::chrono::seconds(opt.webhook_scan_seconds);
            webhooks = std::make_unique<keyauthd::WebhookRole>(store, *webhook_key, so, quota_usage.get(), opt);
        }
        metrics.set_more([&webhooks, &store] {
            return keyauth::render_webhook_metrics(webhooks ? &webhooks->counts() : nullptr,
                                                   webhooks && webhooks->sending(), store);
        });
        const size_t max_connections = server.fit_to_descriptors();
        keyauth::emit({{"event", "listening"},
                        {"listen", opt.listen},
                        {opt.etcd.empty() ? "db" : "etcd", opt.etcd.empty() ? opt.db : opt.etcd},
                        {"usageDb", opt.etcd.empty() ? nlohmann::json(opt.usage_db) : nlohmann::json(nullptr)},
                        {"maxConnections", max_connections},
                        {"trustedProxies", opt.trusted_proxies}});
        if (admin_server) keyauth::emit({{"event", "listening"}, {"adminListen", opt.admin_listen}});
        if (webhooks) webhooks->start();
        else keyauth::emit({{"event", "webhooks_off"}, {"reason", webhooks_off}});
        // both stop on the same SIGTERM (each server waits for it)
        keyauth::HttpServer::Stopped admin_how;
        std::thread admin_thread;
        if (admin_server) admin_thread = std::thread([&] { admin_how = admin_server->run(); });
        keyauth::HttpServer::Stopped how = server.run();
        if (admin_thread.joinable()) admin_thread.join();
        if (webhooks) webhooks->stop();
        how.all_answered = how.all_answered && admin_how.all_answered;
        how.workers_idle = how.workers_idle && admin_how.workers_idle;
        keyauth::emit({{"event", "stopped"},
                        {"allAnswered", how.all_answered},
                        {"workersIdle", how.workers_idle}});
        // A worker still inside the store: leave without closing it under
        // that worker; LMDB never commits half a transaction.
        if (!how.workers_idle) std::_Exit(1);
        return how.all_answered ? 0 : 1;
    } catch (const std::exception &e) {
        std::cerr << "keyauthd: " << e.what() << "\n";
        return 1;
    }
}
