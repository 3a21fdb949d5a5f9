// One HTTP exchange as the daemons' handlers see it, independent of the
// server that carries it (http_server.h): keyauthd's console API and
// keyauth-syncd's /metrics and /healthz take an HttpRequest and return an
// HttpResponse, and unit tests call them directly.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace keyauth {

// Bodies over this are refused (413) before they are read.
inline constexpr size_t kMaxRequestBody = 64 * 1024;

struct HttpRequest {
    std::string method;
    std::string path;           // percent-decoded, without the query string
    // The query parameters the console API pages with: the raw (decoded)
    // ?limit= and ?cursor= values; any other parameter is ignored.
    std::string query_limit;
    bool has_limit = false;
    std::string query_cursor;
    bool has_cursor = false;
    // The whole query string (after '?'), undecoded: GET /v1/usage reads
    // its parameters from it (url.h query_params) and refuses unknown ones.
    std::string query;
    std::string authorization;  // Authorization header value
    bool has_authorization = false;
    std::string content_type;
    std::string accept;  // the Accept header (the usage report's CSV or JSON)
    std::string client_address;  // for the audit trail (http_server.cc says whose)
    // GitHub's secret scanning signs its reports: Github-Public-Key-Identifier
    // and Github-Public-Key-Signature, as sent (empty when absent).
    std::string github_key_identifier;
    std::string github_key_signature;
    std::string body;
};

struct HttpResponse {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
    std::vector<std::pair<std::string, std::string>> headers;
    std::string account;         // the authenticated account id, for the access log
    std::string internal_error;  // for the daemon's log, never sent
    // An answer too large to hold (the usage report): when set, the server
    // sends the head (chunked), then `body`, then each piece this makes,
    // one at a time, until it returns false. It runs on the worker thread
    // that ran the handler, after the handler returned. A throw cuts the
    // connection short, so the client sees a broken transfer, never a
    // complete-looking one.
    std::function<bool(std::string &piece)> stream;
    // A streamed answer's trailer fields, asked for after the last piece
    // (a checksum of what was sent: keyauth-syncd's /snapshot). Name them in
    // a Trailer header.
    std::function<std::vector<std::pair<std::string, std::string>>()> trailer;
};

// A JSON body: the value and a newline.
HttpResponse json_response(int status, std::string json_text);
// The one error layout of every daemon:
// {"error":{"code":...,"message":...}} plus "field" for validation errors.
HttpResponse json_error(int status, const std::string &code, const std::string &message,
                        const std::string &field = "");

}  // namespace keyauth
