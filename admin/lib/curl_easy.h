// What the libcurl transfers that leave this host for an address someone
// configured share (webhook_http.h's POST, http_get.h's GET): owned handles,
// and the options that keep one transfer from being sent anywhere else or
// held for longer than asked.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <memory>

namespace keyauth {

struct CurlEasyFree {
    void operator()(CURL *e) const { curl_easy_cleanup(e); }
};
struct CurlSlistFree {
    void operator()(curl_slist *l) const { curl_slist_free_all(l); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyFree>;
using CurlSlist = std::unique_ptr<curl_slist, CurlSlistFree>;

// On `e`: libcurl's reason for a failure into `error_buffer` (CURL_ERROR_SIZE
// bytes, which must outlive the transfer); no signals (threads: no SIGALRM);
// no redirect followed (a 3xx is the answer); no proxy, whatever http_proxy,
// ALL_PROXY and the like say (a proxy would be dialled instead of the
// address asked for); the whole transfer, and the connection, within
// `timeout` (at least 1 ms: 0 would mean none).
void curl_guard_transfer(CURL *e, char *error_buffer, std::chrono::milliseconds timeout);

}  // namespace keyauth
