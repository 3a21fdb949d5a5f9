// keyauthd: the console's key-management daemon. It serves /v1/keys over
// HTTP on loopback, behind nginx (nginx_conf/console_api.conf), and writes
// the LMDB store the edge reads. Every 2xx is sent after a durable commit.
//
//   keyauthd --db PATH --listen 127.0.0.1:PORT
#include <httplib.h>
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include <atomic>
#include <chrono>

#include "console_api.h"
#include "key_json.h"
#include "no_core_dumps.h"
#include "redact.h"
#include "store.h"

namespace {

const char kUsage[] = R"(usage: keyauthd --db PATH --listen 127.0.0.1:PORT

Serves the console key-management API (POST /v1/keys, GET /v1/keys,
POST /v1/keys/{id}/revoke) over HTTP. Put it behind nginx: see
nginx_conf/console_api.conf. Stops gracefully on SIGTERM or SIGINT: in-flight
requests finish, then the store is closed.

  --db PATH       LMDB environment directory (created if missing)
  --listen ADDR   loopback address and port to listen on, e.g. 127.0.0.1:8081
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
    const char *b = spec.data() + colon + 1, *e = spec.data() + spec.size();
    auto [p, ec] = std::from_chars(b, e, port);
    return ec == std::errc() && p == e && port > 0 && port < 65536;
}

// The account a request authenticated as, handed from the handler to the
// logger, which httplib runs on the same thread right after it.
thread_local std::string t_account;
thread_local std::string t_error;  // an internal error's detail, logged only

// One line per request; never the body, the Authorization header or a query
// string (a cursor is harmless, but the rule is simpler without exceptions).
void log_line(const httplib::Request &req, const httplib::Response &res) {
    std::string account, error;
    account.swap(t_account);
    error.swap(t_error);
    // The path and method come from the client: escaped as JSON strings,
    // and any secret pasted into them masked.
    // masked before it is cut: a secret cut in two would escape the mask
    std::string path = req.path, method = req.method.substr(0, 16);
    keyauth::redact_secrets(path.data(), path.size());
    if (path.size() > 512) path.resize(512);
    nlohmann::ordered_json line = {{"ts", keyauth::format_time(keyauth::wall_clock_ms())},
                           {"remote", req.remote_addr},
                           {"method", method},
                           {"path", path},
                           {"status", res.status}};
    if (!account.empty()) line["account"] = account;
    if (!error.empty()) {
        keyauth::redact_secrets(error.data(), error.size());
        line["error"] = error;
    }
    std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fputs(text.c_str(), stderr);
}

void send(const keyauth::ConsoleResponse &out, httplib::Response &res) {
    res.status = out.status;
    for (const auto &h : out.headers) res.set_header(h.first, h.second);
    t_account = out.account;
    t_error = out.internal_error;
    res.set_content(out.body, "application/json");
}

void serve(keyauth::ConsoleApi &api, const httplib::Request &req, httplib::Response &res) {
    keyauth::ConsoleRequest in;
    in.method = req.method;
    in.path = req.path;
    in.has_limit = req.has_param("limit");
    in.query_limit = req.get_param_value("limit");
    in.has_cursor = req.has_param("cursor");
    in.query_cursor = req.get_param_value("cursor");
    in.has_authorization = req.has_header("Authorization");
    in.authorization = req.get_header_value("Authorization");
    in.content_type = req.get_header_value("Content-Type");
    in.body = req.body;
    send(api.handle(in), res);
}

// A body this server must not read: httplib would inflate a compressed one
// without bound, and reads a chunked one past any size limit. Refused before
// a byte of it is read; the connection then closes, since the body is still
// in it. nginx (console_api.conf) sends neither.
bool refuse_body(const httplib::Request &req, httplib::Response &res) {
    keyauth::ConsoleResponse out;
    if (req.has_header("Content-Encoding")) {
        out = keyauth::console_error(415, "UNSUPPORTED_MEDIA_TYPE",
                                     "Compressed request bodies are not accepted");
    } else if (req.has_header("Transfer-Encoding")) {
        out = keyauth::console_error(411, "LENGTH_REQUIRED",
                                     "Send the body with a Content-Length");
    } else {
        return false;
    }
    out.headers.emplace_back("Connection", "close");
    send(out, res);
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    std::string db, listen, map_mib;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if ((a == "--db" || a == "--listen" || a == "--map-size") && i + 1 < argc) {
            (a == "--db" ? db : a == "--listen" ? listen : map_mib) = argv[++i];
        } else {
            usage_error("unknown argument \"" + a + "\"");
        }
    }
    if (db.empty()) usage_error("--db PATH is required");
    std::string host;
    int port = 0;
    if (!parse_listen(listen, host, port)) usage_error("--listen needs HOST:PORT, e.g. 127.0.0.1:8081");
    size_t map_size = 0;  // as the store was written, 4 GiB for a new one
    if (!map_mib.empty()) {
        size_t mib = 0;
        auto [p, ec] = std::from_chars(map_mib.data(), map_mib.data() + map_mib.size(), mib);
        if (ec != std::errc() || p != map_mib.data() + map_mib.size() || mib < 1 || mib > (1u << 20))
            usage_error("--map-size takes MiB, from 1 to 1048576");
        map_size = mib << 20;
    }

    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthd: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }

    // Signals are taken by one thread with sigwait, so stopping is not done
    // from a signal handler.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    try {
        keyauth::Store store(db, map_size);
        // Well inside nginx's proxy_read_timeout (10 s in console_api.conf):
        // a create is never committed after the console has given up on it.
        store.set_write_wait_limit(std::chrono::seconds(5));
        keyauth::ConsoleApi api(store);
        httplib::Server svr;
        // Bodies up to 64 KiB are judged by the API (413 in the JSON layout);
        // anything far larger is cut off by the server itself.
        svr.set_payload_max_length(4 * keyauth::ConsoleApi::kMaxBody);
        // Headers and body go out in separate writes: without TCP_NODELAY,
        // Nagle and delayed ACKs add ~40 ms to every keep-alive answer.
        svr.set_tcp_nodelay(true);
        svr.set_read_timeout(10, 0);
        svr.set_write_timeout(10, 0);
        // Every path and method goes to the API, which owns 404 and 405.
        auto handler = [&](const httplib::Request &req, httplib::Response &res) {
            serve(api, req, res);
        };
        const char *any = R"(/.*)";
        svr.Get(any, handler).Post(any, handler).Put(any, handler);
        svr.Delete(any, handler).Patch(any, handler).Options(any, handler);
        svr.set_logger(log_line);
        // Before any body is read: refuse the bodies this server must not
        // read; and a request without Content-Length has no body (RFC 9112
        // 6.3, once Transfer-Encoding is refused), but httplib 0.11 waits for
        // EOF on such a POST: answer those here.
        svr.set_pre_routing_handler([&](const httplib::Request &req, httplib::Response &res) {
            if (refuse_body(req, res)) return httplib::Server::HandlerResponse::Handled;
            if (req.has_header("Content-Length")) {
                return httplib::Server::HandlerResponse::Unhandled;
            }
            serve(api, req, res);
            return httplib::Server::HandlerResponse::Handled;
        });
        if (!svr.bind_to_port(host, port)) {
            std::cerr << "keyauthd: cannot listen on " << listen << ": " << std::strerror(errno)
                      << "\n";
            return 1;
        }
        std::atomic<bool> listening_over{false};
        std::thread stopper([&] {
            int sig = 0;
            sigwait(&stop_signals, &sig);
            std::fprintf(stderr, "{\"event\":\"stopping\",\"signal\":%d}\n", sig);
            // stop() is a no-op until the server runs: a signal that comes
            // during start-up waits for it.
            while (!svr.is_running() && !listening_over) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            svr.stop();
        });
        std::fprintf(stderr, "{\"event\":\"listening\",\"listen\":\"%s\",\"db\":\"%s\"}\n",
                     listen.c_str(), db.c_str());
        bool ok = svr.listen_after_bind();
        listening_over = true;
        // listen returns once stopped; the server's pool finishes in-flight
        // requests before the store closes.
        if (stopper.joinable()) {
            if (!ok) pthread_kill(stopper.native_handle(), SIGTERM);
            stopper.join();
        }
        std::fprintf(stderr, "{\"event\":\"stopped\"}\n");
        return ok ? 0 : 1;
    } catch (const std::exception &e) {
        std::cerr << "keyauthd: " << e.what() << "\n";
        return 1;
    }
}
