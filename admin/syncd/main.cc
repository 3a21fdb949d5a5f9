// keyauth-syncd: the edge host's mirror of etcd, and the only writer of the
// LMDB store the nginx workers there read (docs/scale-out.md).
//
//   keyauth-syncd --etcd URL[,URL...] --db PATH [--metrics 127.0.0.1:PORT] [--allow-remote]
//                 [--etcd-prefix /keyauth/1] [--map-size MIB]
//                 [--etcd-cacert F] [--etcd-cert F --etcd-key F]
//                 [--usage-db PATH] [--usage-interval SECONDS] [--usage-history DAYS]
//                 [--quota-interval MS]
//                 [--quota-redis redis://[USER@]HOST[:PORT] [--quota-redis-interval MS]]
//                 [--snapshot-listen IP:PORT [--snapshot-allow CIDRS] [--snapshot-timeout S]]
//                 [--bootstrap-from URL[,URL...]]
//   keyauth-syncd --snapshot-copy PATH      (what GET /snapshot runs for each copy)
//
// The sync loop, the usage publisher and the quota exchange (and its Redis
// transport, with --quota-redis) run on threads of their own (a slow etcd
// delays usage and quotas, never the mirror); the main thread serves
// /metrics and /healthz (or only waits) until SIGTERM or SIGINT, and a
// thread of its own GET /snapshot, with --snapshot-listen.
#include <signal.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "access_log.h"
#include "http_server.h"
#include "mirror.h"
#include "quota_exchange.h"
#include "quota_redis.h"
#include "snapshot_copy.h"
#include "snapshot_service.h"
#include "sync_loop.h"
#include "syncd_log.h"
#include "syncd_metrics.h"
#include "syncd_options.h"
#include "usage_publisher.h"

namespace {

// Without a listener, the main thread waits for the signal itself: blocked
// before the sync thread starts (which inherits the mask), taken by sigwait.
void block_stop_signals(sigset_t &set) {
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

}  // namespace

int main(int argc, char **argv) {
    using namespace keyauth::syncd;
    if (std::string copy_of; snapshot_copy_mode(argc, argv, copy_of)) {
        std::string error;
        const int rc = write_snapshot_copy(copy_of, STDOUT_FILENO, error);
        if (rc != 0) log_event("snapshot copy failed", {{"db", copy_of}, {"error", error}});
        return rc;
    }
    Options opt = parse_options(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    try {
        Mirror mirror(opt.db, opt.map_size);
        Metrics metrics(opt.max_lag);
        SyncOptions so;
        so.etcd.endpoints = opt.etcd;
        so.etcd.ca_file = opt.etcd_cacert;
        so.etcd.cert_file = opt.etcd_cert;
        so.etcd.key_file = opt.etcd_key;
        so.prefix = opt.prefix;
        so.bootstrap_from = opt.bootstrap_from;
        std::string error;
        std::unique_ptr<SyncLoop> loop = SyncLoop::make(so, mirror, metrics, error);
        if (!loop) {
            std::cerr << "keyauth-syncd: " << error << "\n";
            return 1;
        }

        UsagePublisherOptions uo;
        uo.etcd = so.etcd;
        uo.prefix = opt.prefix;
        uo.usage_db = opt.usage_db;
        uo.interval = opt.usage_interval;
        uo.history_days = opt.usage_history_days;
        std::unique_ptr<UsagePublisher> publisher = UsagePublisher::make(uo, metrics, error);
        if (!publisher) {
            std::cerr << "keyauth-syncd: " << error << "\n";
            return 1;
        }

        const QuotaExchangeOptions qo{uo.etcd, uo.prefix, uo.usage_db, opt.quota_interval};
        std::unique_ptr<QuotaExchange> quotas = QuotaExchange::make(qo, metrics, error);
        if (!quotas) {
            std::cerr << "keyauth-syncd: " << error << "\n";
            return 1;
        }

        std::unique_ptr<QuotaRedis> quota_redis;
        if (!opt.quota_redis.empty()) {
            QuotaRedisOptions ro;
            ro.host = opt.quota_redis_host;
            ro.port = opt.quota_redis_port;
            ro.user = opt.quota_redis_user;
            if (const char *pw = std::getenv("KEYAUTH_SYNCD_REDIS_PASSWORD")) ro.password = pw;
            ro.interval = opt.quota_redis_interval;
            metrics.enable_quota_redis();
            quota_redis = std::make_unique<QuotaRedis>(std::move(ro), *quotas, metrics);
        }

        std::unique_ptr<keyauth::HttpServer> server;
        sigset_t stop_signals;
        if (!opt.metrics.empty()) {
            keyauth::HttpServerLimits limits;  // a scraper or two, never a crowd
            limits.workers = 2;
            limits.queue = 16;
            limits.max_connections = 64;
            server = std::make_unique<keyauth::HttpServer>(
                [&metrics](const keyauth::HttpRequest &r) { return metrics.handle(r); }, limits,
                [](const keyauth::ExchangeLog &x) {
                    if (x.status >= 400) keyauth::log_exchange(x);  // not every scrape
                });
            if (!server->bind(opt.metrics_host, opt.metrics_port, error)) {
                std::cerr << "keyauth-syncd: cannot listen on " << opt.metrics << ": " << error << "\n";
                return 1;
            }
        }
        std::unique_ptr<SnapshotService> snapshots;
        std::unique_ptr<keyauth::HttpServer> snapshot_server;
        if (!opt.snapshot_listen.empty()) {
            // a copy each for the few peers starting at once, and a worker
            // to refuse the others
            keyauth::HttpServerLimits limits;
            limits.workers = 2;
            limits.queue = 4;
            limits.max_connections = 16;
            limits.head_timeout = std::chrono::seconds(5);
            limits.write_timeout = opt.snapshot_timeout;
            // run from /proc/self/exe: the same program even if its file
            // was replaced since (an upgrade)
            snapshots = std::make_unique<SnapshotService>(opt.db, opt.snapshot_allow, "/proc/self/exe", metrics);
            snapshot_server = std::make_unique<keyauth::HttpServer>(
                [&snapshots](const keyauth::HttpRequest &r) { return snapshots->handle(r); }, limits,
                [](const keyauth::ExchangeLog &x) { keyauth::log_exchange(x); });
            if (!snapshot_server->bind(opt.snapshot_host, opt.snapshot_port, error)) {
                std::cerr << "keyauth-syncd: cannot listen on " << opt.snapshot_listen << ": " << error << "\n";
                return 1;
            }
        }
        if (!server && !snapshot_server) block_stop_signals(stop_signals);

        const auto &mark = mirror.mark();
        log_event("started", {{"db", opt.db},
                              {"prefix", opt.prefix},
                              {"endpoints", opt.etcd},
                              {"metrics", opt.metrics},
                              {"quotaRedis", opt.quota_redis},
                              {"snapshotListen", opt.snapshot_listen},
                              {"appliedRevision", mark ? mark->revision : 0}});
        std::thread sync([&loop] { loop->run(); });
        std::thread usage([&publisher] { publisher->run(); });
        std::thread quota([&quotas] { quotas->run(); });
        std::thread redis;  // a round must not wait behind a slow etcd one
        if (quota_redis) redis = std::thread([&quota_redis] { quota_redis->run(); });
        struct Joiner {  // however main leaves, every thread is stopped and joined
            SyncLoop &loop;
            UsagePublisher &publisher;
            QuotaExchange &quotas;
            QuotaRedis *quota_redis;
            std::thread &sync, &usage, &quota, &redis;
            ~Joiner() {
                loop.stop();
                publisher.stop();
                quotas.stop();
                if (quota_redis) quota_redis->stop();
                if (sync.joinable()) sync.join();
                if (usage.joinable()) usage.join();
                if (quota.joinable()) quota.join();
                if (redis.joinable()) redis.join();
            }
        } joiner{*loop, *publisher, *quotas, quota_redis.get(), sync, usage, quota, redis};
        // each server stops on SIGTERM or SIGINT by itself
        if (server && snapshot_server) {
            std::thread snapshot_thread([&snapshot_server] { snapshot_server->run(); });
            server->run();
            snapshot_thread.join();
        } else if (server || snapshot_server) {
            (server ? server : snapshot_server)->run();
        } else {
            int sig = 0;
            sigwait(&stop_signals, &sig);
        }
        loop->stop();
        publisher->stop();
        quotas->stop();
        if (quota_redis) quota_redis->stop();
        sync.join();
        usage.join();
        quota.join();
        if (redis.joinable()) redis.join();
        log_event("stopped", {{"appliedRevision", metrics.applied_revision()}});
        return 0;
    } catch (const std::exception &e) {
        std::cerr << "keyauth-syncd: " << e.what() << "\n";
        return 1;
    }
}
