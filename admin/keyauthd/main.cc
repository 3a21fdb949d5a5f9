// keyauthd: the console's key-management daemon. It serves /v1/keys over
// HTTP on loopback, behind nginx (nginx_conf/console_api.conf), and writes
// the LMDB store the edge reads. Every 2xx is sent after a durable commit.
//
//   keyauthd --db PATH --listen 127.0.0.1:PORT [--max-connections N] [--allow-remote]
#include <signal.h>

#include <boost/asio/ip/address.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "console_api.h"
#include "console_server.h"
#include "key_json.h"
#include "no_core_dumps.h"
#include "redact.h"
#include "store.h"

namespace {

const char kUsage[] = R"(usage: keyauthd --db PATH --listen 127.0.0.1:PORT [--allow-remote]

Serves the console key-management API (POST /v1/keys, GET /v1/keys,
POST /v1/keys/{id}/revoke) over HTTP. Put it behind nginx: see
nginx_conf/console_api.conf. Stops gracefully on SIGTERM or SIGINT: in-flight
requests finish and answer within 4.5 s, then the store is closed.

Limits: 4 workers with 64 queued requests (more: 503 SERVER_BUSY), 512
connections (more: 503), 100 header fields and 16 KiB of head (431), 64 KiB
bodies (413); 5 s for an idle keep-alive connection, 10 s for a request
head, its body (408) and its answer.

  --db PATH       LMDB environment directory (created if missing)
  --listen ADDR   loopback address and port to listen on, e.g. 127.0.0.1:8081
  --max-connections N
                  open connections at most (default 512); one more is
                  answered 503 SERVER_BUSY and closed
  --allow-remote  allow a --listen address other than loopback (the API is
                  meant to sit behind nginx on the same host)
  --map-size MIB  the most the store may grow to: at least this, and never
                  less than it was last written with (default: as written,
                  4096 for a new store; the file is sparse). When it is full,
                  creates answer 507 STORE_FULL; restart with a larger size.
)";

[[noreturn]] void usage_error(const std::string &msg) {
    std::cerr << "keyauthd: " << msg << "\n\n" << kUsage;
    std::exit(2);
}

bool parse_listen(const std::string &spec, std::string &host, int &port) {
    size_t colon = spec.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    host = spec.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);  // [::1]:8081
    }
    const char *b = spec.data() + colon + 1, *e = spec.data() + spec.size();
    auto [p, ec] = std::from_chars(b, e, port);
    return ec == std::errc() && p == e && port > 0 && port < 65536;
}

bool is_loopback(const std::string &host) {
    boost::system::error_code ec;
    auto address = boost::asio::ip::make_address(host, ec);
    return !ec && address.is_loopback();
}

// One JSON line on stderr, escaped by the JSON library.
void emit(const nlohmann::ordered_json &line) {
    std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fputs(text.c_str(), stderr);
}

// One line per request; never the body, a header value or a query string.
void log_exchange(const keyauth::ExchangeLog &x) {
    // The path and method come from the client: any secret pasted into them
    // is masked before they are cut (a secret cut in two would escape the mask).
    std::string path = x.path, method = x.method;
    keyauth::redact_secrets(path.data(), path.size());
    keyauth::redact_secrets(method.data(), method.size());
    if (path.size() > 512) path.resize(512);
    if (method.size() > 16) method.resize(16);
    nlohmann::ordered_json line = {{"ts", keyauth::format_time(keyauth::wall_clock_ms())},
                                   {"remote", x.remote},
                                   {"method", method},
                                   {"path", path},
                                   {"status", x.status}};
    if (!x.account.empty()) line["account"] = x.account;
    if (!x.internal_error.empty()) {
        std::string error = x.internal_error;
        keyauth::redact_secrets(error.data(), error.size());
        line["error"] = error;
    }
    emit(line);
}

}  // namespace

int main(int argc, char **argv) {
    std::string db, listen, map_mib, max_conn;
    bool allow_remote = false;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (a == "--allow-remote") {
            allow_remote = true;
        } else if ((a == "--db" || a == "--listen" || a == "--map-size" ||
                    a == "--max-connections") &&
                   i + 1 < argc) {
            std::string &slot = a == "--db"       ? db
                                : a == "--listen" ? listen
                                : a == "--map-size" ? map_mib
                                                    : max_conn;
            if (!slot.empty()) usage_error(a + " given twice");
            slot = argv[++i];
        } else {
            usage_error("unknown argument \"" + a + "\"");
        }
    }
    if (db.empty()) usage_error("--db PATH is required");
    std::string host;
    int port = 0;
    if (!parse_listen(listen, host, port)) usage_error("--listen needs HOST:PORT, e.g. 127.0.0.1:8081");
    if (!allow_remote && !is_loopback(host)) {
        usage_error("--listen " + listen + " is not a loopback address; add --allow-remote if you mean it");
    }
    size_t map_size = 0;  // as the store was written, 4 GiB for a new one
    if (!map_mib.empty()) {
        size_t mib = 0;
        auto [p, ec] = std::from_chars(map_mib.data(), map_mib.data() + map_mib.size(), mib);
        if (ec != std::errc() || p != map_mib.data() + map_mib.size() || mib < 1 || mib > (1u << 20))
            usage_error("--map-size takes MiB, from 1 to 1048576");
        map_size = mib << 20;
    }

    keyauth::ConsoleServerLimits limits;
    if (!max_conn.empty()) {
        size_t n = 0;
        auto [p, ec] = std::from_chars(max_conn.data(), max_conn.data() + max_conn.size(), n);
        if (ec != std::errc() || p != max_conn.data() + max_conn.size() || n < 1 || n > 65536)
            usage_error("--max-connections takes a number from 1 to 65536");
        limits.max_connections = n;
    }

    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthd: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    try {
        keyauth::Store store(db, map_size);
        // Well inside nginx's proxy_read_timeout (10 s in console_api.conf):
        // a create is never committed after the console has given up on it.
        store.set_write_wait_limit(std::chrono::seconds(5));
        keyauth::ConsoleApi api(store);
        keyauth::ConsoleServer server(api, limits, log_exchange);
        std::string error;
        if (!server.bind(host, port, error)) {
            std::cerr << "keyauthd: cannot listen on " << listen << ": " << error << "\n";
            return 1;
        }
        emit({{"event", "listening"}, {"listen", listen}, {"db", db}});
        keyauth::ConsoleServer::Stopped how = server.run();
        emit({{"event", "stopped"},
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
