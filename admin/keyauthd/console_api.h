// The developer console's key-management API (/v1/keys), independent of the
// HTTP server that carries it: keyauthd maps each request to a HttpRequest
// and writes the HttpResponse back, and the unit tests call it directly.
#pragma once

#include <string>

#include "http_exchange.h"
#include "store.h"

namespace keyauth {

class ConsoleApi {
public:
    static constexpr size_t kMaxBody = kMaxRequestBody;
    static constexpr size_t kDefaultPage = 50;
    static constexpr size_t kMaxPage = 100;

    explicit ConsoleApi(Store &store) : store_(store) {}

    // Never throws: every failure becomes a JSON error response.
    HttpResponse handle(const HttpRequest &req) noexcept;

private:
    HttpResponse route(const HttpRequest &req);
    HttpResponse create_key(const Id &account, const HttpRequest &req);
    HttpResponse list_keys(const Id &account, const HttpRequest &req);
    HttpResponse revoke_key(const Id &account, const std::string &id_text);

    Store &store_;
};

}  // namespace keyauth
