#include "webhook_http.h"

#include <curl/curl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "curl_easy.h"
#include "curl_global.h"
#include "webhook_address.h"
#include "webhook_url.h"

namespace keyauth {
namespace {

constexpr size_t kMaxAnswerBytes = 64 * 1024;
constexpr const char *kUserAgent = "keyauth-webhooks/1";

// What the callbacks of one transfer share with post_webhook.
struct Transfer {
    bool allow_private = false;
    const std::string *ca_file = nullptr;
    std::vector<std::string> refused;  // why each refused address was (distinct)
    int sockets_opened = 0;
    bool ca_file_failed = false;
    size_t answer_bytes = 0;
    bool answer_cut = false;       // we ended it past kMaxAnswerBytes
    bool final_headers = false;    // a non-1xx status line and its headers are in
    CURL *easy = nullptr;
};

// CURLOPT_OPENSOCKETFUNCTION: the one place an address becomes a socket,
// so the check sees exactly what is dialled.
curl_socket_t open_checked_socket(void *user, curlsocktype purpose, curl_sockaddr *address) {
    auto *t = static_cast<Transfer *>(user);
    std::string why;
    if (purpose != CURLSOCKTYPE_IPCXN) {
        why = "not an outgoing connection";
    } else if (webhook_address_allowed(&address->addr, address->addrlen, t->allow_private, why)) {
        curl_socket_t fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
        if (fd != CURL_SOCKET_BAD) t->sockets_opened++;
        return fd;
    }
    if (std::find(t->refused.begin(), t->refused.end(), why) == t->refused.end()) t->refused.push_back(why);
    return CURL_SOCKET_BAD;
}

// CURLOPT_SSL_CTX_FUNCTION: called after libcurl loaded the system's CA
// bundle into the context's store, so the file's certificates are added to
// it (CURLOPT_CAINFO would have replaced the bundle instead).
CURLcode add_trust_anchors(CURL *, void *ssl_ctx, void *user) {
    auto *t = static_cast<Transfer *>(user);
    X509_STORE *store = SSL_CTX_get_cert_store(static_cast<SSL_CTX *>(ssl_ctx));
    if (store == nullptr || X509_STORE_load_file(store, t->ca_file->c_str()) != 1) {
        ERR_clear_error();
        t->ca_file_failed = true;
        return CURLE_SSL_CACERT_BADFILE;
    }
    return CURLE_OK;
}

size_t drop_answer(char *, size_t size, size_t count, void *user) {
    auto *t = static_cast<Transfer *>(user);
    t->answer_bytes += size * count;
    if (t->answer_bytes > kMaxAnswerBytes) {
        t->answer_cut = true;
        return 0;  // ends the transfer (CURLE_WRITE_ERROR)
    }
    return size * count;
}

// The blank line that ends a header block; a 1xx block is followed by
// another, the final one.
size_t see_header(char *line, size_t size, size_t count, void *user) {
    auto *t = static_cast<Transfer *>(user);
    const size_t n = size * count;
    if ((n == 2 && line[0] == '\r' && line[1] == '\n') || (n == 1 && line[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) t->final_headers = true;
    }
    return n;
}

bool header_text_ok(const std::string &s) {
    return s.find_first_of(std::string("\r\n\0", 3)) == std::string::npos;
}

bool header_name_ok(const std::string &name) {
    if (name.empty() || !header_text_ok(name)) return false;
    return std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127 && c != ':'; });
}

bool same_name(const std::string &a, const char *b) {
    std::string lower(a);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return lower == b;
}

bool append(CurlSlist &list, const std::string &line) {
    curl_slist *more = curl_slist_append(list.get(), line.c_str());
    if (more == nullptr) return false;
    list.release();
    list.reset(more);
    return true;
}

bool is_tls_error(CURLcode code) {
    switch (code) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_USE_SSL_FAILED: return true;
    default: return false;
    }
}

// libcurl's reason for a failure, with a guard: should a header value or
// the body ever be part of it, only the generic text of the code is kept.
std::string detail_of(CURLcode code, const char *buffer,
                      const std::vector<std::pair<std::string, std::string>> &headers,
                      const std::string &body) {
    std::string text = buffer[0] != '\0' ? buffer : curl_easy_strerror(code);
    constexpr size_t kShortest = 8;  // shorter values could match by chance
    auto in_text = [&text](const std::string &s) {
        return s.size() >= kShortest && text.find(s) != std::string::npos;
    };
    bool leaks = in_text(body);
    for (const auto &h : headers) leaks = leaks || in_text(h.second);
    return leaks ? curl_easy_strerror(code) : text;
}

std::string join(const std::vector<std::string> &parts) {
    std::string out;
    for (const std::string &p : parts) out += (out.empty() ? "" : "; ") + p;
    return out;
}

WebhookHttpResult failed(std::string error) {
    WebhookHttpResult r;
    r.error = std::move(error);
    return r;
}

}  // namespace

WebhookHttpResult post_webhook(const std::string &url,
                               const std::vector<std::pair<std::string, std::string>> &headers,
                               const std::string &body, const WebhookHttpOptions &options) {
    std::string error;
    CurlUrl parsed = parse_webhook_url(url, error);
    if (!parsed) return failed("refused: " + error);

    CurlSlist list;
    bool has_content_type = false;
    for (const auto &[name, value] : headers) {
        if (!header_name_ok(name) || !header_text_ok(value)) {
            return failed("refused: a header name or value holds a character HTTP does not allow");
        }
        has_content_type = has_content_type || same_name(name, "content-type");
        // "Name;" is libcurl's way to send a header with an empty value
        if (!append(list, value.empty() ? name + ";" : name + ": " + value)) return failed("http: out of memory");
    }
    // no "Expect: 100-continue" wait before a body over 1 KiB
    if ((!has_content_type && !append(list, "Content-Type: application/json")) || !append(list, "Expect:")) {
        return failed("http: out of memory");
    }

    if (!curl_global_ready()) return failed("http: libcurl could not be initialised");
    CurlEasy handle(curl_easy_init());
    if (!handle) return failed("http: libcurl could not allocate a handle");
    CURL *e = handle.get();

    Transfer t;
    t.allow_private = options.allow_private;
    t.ca_file = &options.ca_file;
    t.easy = e;
    char buffer[CURL_ERROR_SIZE] = "";

    curl_guard_transfer(e, buffer, options.timeout);  // no redirect, no proxy, the timeout
    curl_easy_setopt(e, CURLOPT_CURLU, parsed.get());
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_checked_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &t);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    if (!options.ca_file.empty()) {
        if (curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, add_trust_anchors) != CURLE_OK) {
            return failed("tls: this libcurl cannot add trust anchors (it needs OpenSSL)");
        }
        curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, &t);
    }
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_USERAGENT, kUserAgent);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list.get());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());  // not copied: body outlives the transfer
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, drop_answer);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, see_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);

    const CURLcode code = curl_easy_perform(e);
    WebhookHttpResult result;
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    // The receiver's answer is its status line and headers: what happens to
    // the body after them (cut past the limit, slow) does not change it.
    if (code == CURLE_OK || (t.final_headers && status >= 200)) {
        result.status = status;
        return result;
    }
    const std::string detail = detail_of(code, buffer, headers, body);
    if (!t.refused.empty() && t.sockets_opened == 0) {
        result.error = "refused: " + join(t.refused);
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
        result.error = "timeout";
    } else if (t.ca_file_failed) {
        result.error = "tls: the CA file could not be loaded";
    } else if (code == CURLE_PEER_FAILED_VERIFICATION) {
        result.error = "tls: certificate verify failed: " + detail;
    } else if (is_tls_error(code)) {
        result.error = "tls: " + detail;
    } else if (code == CURLE_COULDNT_RESOLVE_HOST) {
        result.error = "dns: " + detail;
    } else if (code == CURLE_COULDNT_CONNECT) {
        result.error = "connect: " + detail;
    } else {
        result.error = "http: " + detail;
    }
    if (!t.refused.empty() && t.sockets_opened > 0) result.error += " (also refused: " + join(t.refused) + ")";
    return result;
}

}  // namespace keyauth
