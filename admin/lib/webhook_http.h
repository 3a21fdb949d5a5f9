// One webhook delivery attempt: a single HTTPS POST (issue #46 items 4, 5).
// The sender loop (retries, schedule, store) calls it; this file only
// decides how one request goes out and what came back.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace keyauth {

struct WebhookHttpOptions {
    // --webhook-allow-private: private, loopback and link-local addresses may
    // be dialled (webhook_address.h says exactly which).
    bool allow_private = false;
    // --webhook-ca-file: PEM certificates ADDED to the system's trust anchors
    // (a private CA), never replacing them. Empty: the system's only.
    std::string ca_file;
    // The whole attempt: resolving, connecting, TLS, sending, the answer.
    std::chrono::milliseconds timeout{10000};
};

struct WebhookHttpResult {
    long status = 0;  // the receiver's HTTP status; 0: no HTTP answer (see error)
    // Empty when status is set. Otherwise one of:
    //   "refused: <why>"        not dialled: the URL (webhook_url.h's sentence),
    //                           a header, or every address the host resolved to
    //                           ("refused: 10.0.0.1 is private")
    //   "timeout"               no whole answer within options.timeout
    //   "tls: <detail>"         e.g. "tls: certificate verify failed: ..."
    //   "dns: <detail>", "connect: <detail>", "http: <detail>"
    // It names addresses and libcurl's reasons, never the body or a header
    // value (they carry the signature).
    std::string error;
};

// POSTs `body` to `url` with `headers` (name, value) added. Never throws for
// anything the network or the receiver does.
//  - The URL is parsed and checked by webhook_url.h's rules first.
//  - Only https; redirects are never followed: a 3xx is returned as its
//    status like any other non-2xx.
//  - Each address libcurl is about to connect to is checked, on the socket
//    it is about to open (webhook_address.h): a refused address is never
//    dialled, whatever DNS said before.
//  - No proxy, whatever the environment says (http_proxy, ALL_PROXY, ...):
//    a proxy would be dialled instead of the checked address.
//  - Certificates and host names are always verified; TLS 1.2 or later;
//    HTTP/1.1; User-Agent "keyauth-webhooks/1"; Content-Type
//    application/json unless `headers` name one.
//  - The answer's body is read and dropped; past 64 KiB the transfer ends
//    and the status already received stands (a receiver streaming forever
//    cannot hold the sender until the timeout).
//  - A fresh connection per call; no state shared between calls, so calls
//    may come from any thread (one at a time per call, as usual).
// Header names and values must not contain CR, LF or NUL (refused).
WebhookHttpResult post_webhook(const std::string &url,
                               const std::vector<std::pair<std::string, std::string>> &headers,
                               const std::string &body, const WebhookHttpOptions &options);

}  // namespace keyauth
