// The developer console's key-management API (/v1/keys), independent of the
// HTTP server that carries it: keyauthd maps each request to a ConsoleRequest
// and writes the ConsoleResponse back, and the unit tests call it directly.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "store.h"

namespace keyauth {

struct ConsoleRequest {
    std::string method;
    std::string path;           // without the query string
    std::string query_limit;    // raw ?limit= value, empty if absent
    bool has_limit = false;
    std::string query_cursor;   // raw ?cursor= value
    bool has_cursor = false;
    std::string authorization;  // Authorization header value
    bool has_authorization = false;
    std::string content_type;
    std::string body;
};

struct ConsoleResponse {
    int status = 200;
    std::string body;  // JSON
    std::vector<std::pair<std::string, std::string>> headers;
    std::string account;  // the authenticated account id, for the access log
    std::string internal_error;  // for the daemon's log, never sent
};

class ConsoleApi {
public:
    static constexpr size_t kMaxBody = 64 * 1024;
    static constexpr size_t kDefaultPage = 50;
    static constexpr size_t kMaxPage = 100;

    explicit ConsoleApi(Store &store) : store_(store) {}

    // Never throws: every failure becomes a JSON error response.
    ConsoleResponse handle(const ConsoleRequest &req) noexcept;

private:
    ConsoleResponse route(const ConsoleRequest &req);
    ConsoleResponse create_key(const Id &account, const ConsoleRequest &req);
    ConsoleResponse list_keys(const Id &account, const ConsoleRequest &req);
    ConsoleResponse revoke_key(const Id &account, const std::string &id_text);

    Store &store_;
};

// {"error":{"code":...,"message":...}} plus "field" for validation errors.
ConsoleResponse console_error(int status, const std::string &code, const std::string &message,
                              const std::string &field = "");

}  // namespace keyauth
