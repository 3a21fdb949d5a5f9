// The developer console's API (/v1/keys, /v1/audit, /v1/account, /v1/usage), independent of the
// HTTP server that carries it: keyauthd maps each request to a HttpRequest
// and writes the HttpResponse back, and the unit tests call it directly.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "http_exchange.h"
#include "key_api.h"
#include "store.h"
#include "quota_usage.h"
#include "usage_source.h"

namespace keyauth {

class ConsoleApi {
public:
    static constexpr size_t kMaxBody = kMaxRequestBody;

    // usage: where the keys' usage and last use are read (none: zeros);
    // quota: where what quotas used this period is read (none: 0).
    explicit ConsoleApi(Store &store, UsageSource *usage = nullptr, QuotaUsageSource *quota = nullptr)
        : store_(store), usage_(usage), keys_(store, usage, quota) {}

    // Never throws: every failure becomes a JSON error response.
    HttpResponse handle(const HttpRequest &req) noexcept;

private:
    HttpResponse route(const HttpRequest &req);
    HttpResponse list_audit(const Id &account, const HttpRequest &req);

    Store &store_;
    UsageSource *usage_;
    KeyApi keys_;
};

}  // namespace keyauth
