// The key routes' handlers: create, list, show, change, revoke and roll the
// keys of one account, and that account's own object. The console API calls
// them for the caller's account (a key of another account is 404), the
// admin API for the account a route names; both on the Store's one set of
// rules. Each handler may throw the store's errors: the API's
// answer_or_error (api_support.h) answers them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "http_exchange.h"
#include "quota_usage.h"
#include "store.h"
#include "usage_source.h"

namespace keyauth {

class KeyApi {
public:
    // usage: where the keys' usage and last use are read (none: zeros);
    // quota: where what quotas used this period is read (none: 0).
    KeyApi(Store &store, UsageSource *usage, QuotaUsageSource *quota) : store_(store), usage_(usage), quota_(quota) {}

    HttpResponse create_key(const Id &account, const Actor &actor, const HttpRequest &req);
    HttpResponse list_keys(const Id &account, const HttpRequest &req);
    HttpResponse get_key(const Id &account, const std::string &id_text);
    HttpResponse update_key(const Id &account, const Actor &actor, const std::string &id_text,
                            const HttpRequest &req);
    HttpResponse revoke_key(const Id &account, const Actor &actor, const std::string &id_text);
    HttpResponse roll_key(const Id &account, const Actor &actor, const std::string &id_text,
                          const HttpRequest &req);
    // The account: its plan and effective values, and what its quota used
    // this period (GET /v1/account's object); 404 NOT_FOUND if none.
    HttpResponse get_account(const Id &account);

    QuotaUsageSource *quota_usage() const { return quota_; }

private:
    HttpResponse one_key(const Id &account, const KeyRecord &key, int status);
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
