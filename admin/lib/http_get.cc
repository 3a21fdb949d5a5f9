#include "http_get.h"

#include <curl/curl.h>

#include "curl_easy.h"
#include "curl_global.h"

namespace keyauth {
namespace {

struct Transfer {
    std::string *body = nullptr;
    size_t max_bytes = 0;
    bool too_large = false;
};

size_t keep_answer(char *data, size_t size, size_t count, void *user) {
    auto *t = static_cast<Transfer *>(user);
    const size_t n = size * count;
    if (t->body->size() + n > t->max_bytes) {
        t->too_large = true;
        return 0;  // ends the transfer (CURLE_WRITE_ERROR)
    }
    t->body->append(data, n);
    return n;
}

HttpGetResult failed(std::string error) {
    HttpGetResult r;
    r.error = std::move(error);
    return r;
}

std::string error_of(CURLcode code, const char *buffer) {
    const std::string detail = buffer[0] != '\0' ? buffer : curl_easy_strerror(code);
    switch (code) {
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_RESOLVE_HOST: return "dns: " + detail;
    case CURLE_COULDNT_CONNECT: return "connect: " + detail;
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE: return "tls: " + detail;
    default: return "http: " + detail;
    }
}

}  // namespace

HttpGetResult http_get(const std::string &url, const HttpGetOptions &options) {
    if (!curl_global_ready()) return failed("http: libcurl could not be initialised");
    CurlEasy handle(curl_easy_init());
    if (!handle) return failed("http: libcurl could not allocate a handle");
    CurlSlist headers(curl_slist_append(nullptr, ("Accept: " + options.accept).c_str()));
    if (!headers) return failed("http: out of memory");
    CURL *e = handle.get();

    HttpGetResult result;
    Transfer t;
    t.body = &result.body;
    t.max_bytes = options.max_body_bytes;
    char buffer[CURL_ERROR_SIZE] = "";

    curl_guard_transfer(e, buffer, options.timeout);  // no redirect, no proxy, the timeout
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, options.user_agent.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    // a Content-Length over the bound ends it before any of the body comes
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_body_bytes));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);

    const CURLcode code = curl_easy_perform(e);
    if (code != CURLE_OK) {
        result.body.clear();
        result.error = t.too_large || code == CURLE_FILESIZE_EXCEEDED
                           ? "too large: the answer is over " + std::to_string(t.max_bytes) + " bytes"
                           : error_of(code, buffer);
        return result;
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &result.status);
    return result;
}

}  // namespace keyauth
