// One bounded HTTP(S) GET of a document an operator named by URL (GitHub's
// secret scanning keys, issue #47): the answer's status and body, or why
// there is none. libcurl, as webhook_http.h uses it, with the same refusals:
// no proxy from the environment, no redirect followed.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace keyauth {

struct HttpGetOptions {
    // The whole transfer: resolving, connecting, TLS, the answer.
    std::chrono::milliseconds timeout{5000};
    // An answer's body over this ends the transfer (error, no body).
    size_t max_body_bytes = 1 << 20;
    std::string user_agent = "keyauthd";
    std::string accept = "application/json";
};

struct HttpGetResult {
    long status = 0;   // the server's HTTP status; 0: no whole answer (see error)
    std::string body;  // the whole body, when status is set
    // Empty when status is set. Otherwise "timeout", "too large: the answer
    // is over N bytes", "dns: ...", "connect: ...", "tls: ...", "http: ..."
    // (libcurl's reason; never any of the body).
    std::string error;
};

// GETs `url`: http or https only; a 3xx is returned as its status, never
// followed; no proxy, whatever http_proxy and the like say; certificates and
// host names verified (the system's trust anchors). A fresh connection per
// call, nothing shared: calls may come from any thread. Never throws for
// anything the network or the server does.
HttpGetResult http_get(const std::string &url, const HttpGetOptions &options);

}  // namespace keyauth
