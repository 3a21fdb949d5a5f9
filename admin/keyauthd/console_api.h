// The developer console's API (/v1/keys, /v1/audit, /v1/account, /v1/usage), independent of the
// HTTP server that carries it: keyauthd maps each request to a HttpRequest
// and writes the HttpResponse back, and the unit tests call it directly.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "http_exchange.h"
#include "store.h"
#include "quota_usage.h"
#include "usage_source.h"

namespace keyauth {

class ConsoleApi {
public:
    static constexpr size_t kMaxBody = kMaxRequestBody;
    static constexpr size_t kDefaultPage = 50;
    static constexpr size_t kMaxPage = 100;

    // usage: where the keys' usage and last use are read (none: zeros);
    // quota: where what quotas used this period is read (none: 0).
    explicit ConsoleApi(Store &store, UsageSource *usage = nullptr, QuotaUsageSource *quota = nullptr)
        : store_(store), usage_(usage), quota_(quota) {}

    // Never throws: every failure becomes a JSON error response.
    HttpResponse handle(const HttpRequest &req) noexcept;

private:
    HttpResponse route(const HttpRequest &req);
    HttpResponse create_key(const Id &account, const Actor &actor, const HttpRequest &req);
    HttpResponse list_keys(const Id &account, const HttpRequest &req);
    HttpResponse get_key(const Id &account, const std::string &id_text);
    HttpResponse update_key(const Id &account, const Actor &actor, const std::string &id_text,
                            const HttpRequest &req);
    HttpResponse revoke_key(const Id &account, const Actor &actor, const std::string &id_text);
    HttpResponse roll_key(const Id &account, const Actor &actor, const std::string &id_text,
                          const HttpRequest &req);
    HttpResponse list_audit(const Id &account, const HttpRequest &req);
    HttpResponse get_account(const Id &account);
    HttpResponse one_key(const Id &account, const KeyRecord &key, int status);

    static std::optional<nlohmann::json> object_body(const HttpRequest &req, HttpResponse &refused);
    static std::optional<HttpResponse> page_args(const HttpRequest &req, std::string_view id_prefix,
                                                 size_t &limit, std::optional<Id> &after);
    nlohmann::json key_json(const KeyRecord &key, uint32_t entitlement);
    // The account's effective entitlement (its own or its plan's).
    uint32_t entitlement_of(const Id &account);
    // Fills usage and lastUsedAt of the keys' objects (an array, or one
    // object for one key); returns why usage could not be read, or "".
    std::string add_usage(const Id &account, const std::vector<KeyRecord> &keys, nlohmann::json &objects);

    Store &store_;
    UsageSource *usage_;
    QuotaUsageSource *quota_;
};

}  // namespace keyauth
