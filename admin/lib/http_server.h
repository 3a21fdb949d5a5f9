// The daemons' HTTP/1.1 server (keyauthd's console API, keyauth-syncd's
// /metrics and /healthz): one event-loop thread owns every connection (idle
// keep-alive connections and slow clients cost no worker), complete requests
// go to a bounded pool of workers that run the handler, and every limit the
// server enforces itself answers in the one JSON error layout.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http_exchange.h"

namespace keyauth {

struct HttpServerLimits {
    size_t workers = 4;             // threads running the API (store writes block)
    size_t queue = 64;              // complete requests waiting for a worker; more: 503
    size_t max_connections = 512;   // open connections; more: 503 and close
    size_t max_header_fields = 100;        // more: 431
    size_t max_header_bytes = 16 * 1024;   // request line + fields; more: 431 (414 for the line)
    size_t max_body = kMaxRequestBody;  // more: 413
    // Paths whose bodies may be larger, up to large_body (GitHub's secret
    // scanning reports: 1 MiB); the limit is chosen from the request line
    // before a byte of the body is read.
    std::vector<std::string> large_body_paths;
    size_t large_body = 0;
    std::chrono::milliseconds idle_timeout{5000};   // keep-alive, waiting for a first byte
    std::chrono::milliseconds head_timeout{10000};  // first byte to the end of the head: 408
    std::chrono::milliseconds body_timeout{10000};  // the whole body: 408
    std::chrono::milliseconds write_timeout{10000}; // the whole answer
    std::chrono::milliseconds stop_timeout{4500};   // SIGTERM: in-flight work gets this long
};

// What keyauthd logs of one exchange; the server fills it, keyauthd formats
// it. Never the body, a header value or the query string.
struct ExchangeLog {
    std::string remote;
    std::string method;  // as sent; empty when the request line could not be read
    std::string path;
    int status = 0;
    std::string account;         // from the API: who was authenticated
    std::string internal_error;  // from the API: a detail for the log only
    // From the end of the request's head to the answer being ready (0 when
    // the head could not be read).
    std::chrono::steady_clock::time_point started{};
    double seconds = 0;
};

// The address a request is recorded from: the X-Real-IP header (real_ip,
// null when absent) if the peer is one of the trusted proxies (nginx in
// front) and the value is an IP address, else the peer's own address. Any
// other peer could write any address into the audit trail. The peer and the
// trusted list are canonical (canonical_address).
std::string client_address(const std::string &peer, const std::string *real_ip,
                           const std::vector<std::string> &trusted_proxies);

class HttpServer {
public:
    using Logger = std::function<void(const ExchangeLog &)>;
    // Runs on a worker thread; must not throw.
    using Handler = std::function<HttpResponse(const HttpRequest &)>;

    HttpServer(Handler handler, HttpServerLimits limits, Logger log);
    ~HttpServer();

    // Raises the descriptor limit as far as allowed and lowers the
    // connection limit to what it can hold; returns the connection limit.
    size_t fit_to_descriptors();

    // The peers whose X-Real-IP is believed (see client_address); none
    // unless set. Canonical addresses (parse_address_list); before run().
    void trust_proxies(std::vector<std::string> addresses);

    // Binds (SO_REUSEADDR); false with errno-style detail in `error`.
    bool bind(const std::string &host, int port, std::string &error);

    struct Stopped {
        bool all_answered = true;  // every request in flight was answered in time
        bool workers_idle = true;  // false: a worker is still in the API; do not
                                   // destroy the store under it, _exit instead
    };

    // Serves until SIGTERM or SIGINT: then stops accepting, closes idle and
    // half-read connections, lets in-flight requests finish and answer
    // (Connection: close) within stop_timeout; requests still queued for a
    // worker are answered 503 without running. A second signal stops at once.
    Stopped run();

    struct Impl;  // the event loop and its connections, in console_server.cc

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace keyauth
