#include "console_api.h"

#include <nlohmann/json.hpp>

#include "api_support.h"
#include "auth_header.h"
#include "usage_api.h"

namespace keyauth {
namespace {

using nlohmann::json;

const std::string kKeysPath = "/v1/keys";
const std::string kAuditPath = "/v1/audit";
const std::string kAccountPath = "/v1/account";
const std::string kUsagePath = "/v1/usage";

// Console tokens travel as Bearer credentials too; a suspended account's
// token is known but refused.
std::optional<Id> authenticate(Store &store, const HttpRequest &req, HttpResponse &denied) {
    std::string_view token;
    BearerParse parsed = req.has_authorization ? parse_bearer(req.authorization, token)
                                               : BearerParse::kMissing;
    if (parsed == BearerParse::kMissing) {
        denied = json_error(401, "CONSOLE_TOKEN_REQUIRED",
                               "A console token is required: Authorization: Bearer <token>");
        denied.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"console\"");
        return std::nullopt;
    }
    std::optional<ConsoleLogin> login;
    if (parsed == BearerParse::kFound) login = store.console_login(token);
    if (!login) {
        denied = json_error(401, "INVALID_CONSOLE_TOKEN", "The console token is invalid");
        denied.headers.emplace_back("WWW-Authenticate",
                                    "Bearer realm=\"console\", error=\"invalid_token\"");
        return std::nullopt;
    }
    if (login->suspended) {
        denied = json_error(403, "ACCOUNT_SUSPENDED", "This account is suspended");
        denied.account = id_to_string(kAccountIdPrefix, login->account);
        return std::nullopt;
    }
    return login->account;
}

// /v1/keys/{id} and /v1/keys/{id}/{action}: the id text and the action.
bool split_key_path(const std::string &path, std::string &id, std::string &action) {
    if (path.compare(0, kKeysPath.size() + 1, kKeysPath + "/") != 0) return false;
    std::string rest = path.substr(kKeysPath.size() + 1);
    size_t slash = rest.find('/');
    id = rest.substr(0, slash);
    action = slash == std::string::npos ? "" : rest.substr(slash + 1);
    return !id.empty() && action.find('/') == std::string::npos &&
           (slash == std::string::npos || !action.empty());
}

}  // namespace

HttpResponse ConsoleApi::handle(const HttpRequest &req) noexcept {
    return answer_or_error([&] { return route(req); }, "KEY_NOT_FOUND");
}

HttpResponse ConsoleApi::route(const HttpRequest &req) {
    std::string id, action;
    enum class Route { kKeys, kKey, kRevoke, kRoll, kAudit, kAccount, kUsage } route;
    const char *allow = nullptr;
    if (req.path == kKeysPath) {
        route = Route::kKeys;
        allow = "GET, POST";
    } else if (req.path == kAuditPath) {
        route = Route::kAudit;
        allow = "GET";
    } else if (req.path == kAccountPath) {
        route = Route::kAccount;
        allow = "GET";
    } else if (req.path == kUsagePath) {
        route = Route::kUsage;
        allow = "GET";
    } else if (!split_key_path(req.path, id, action)) {
        return json_error(404, "NOT_FOUND", "No such endpoint");
    } else if (action.empty()) {
        route = Route::kKey;
        allow = "GET, PATCH";
    } else if (action == "revoke" || action == "roll") {
        route = action == "revoke" ? Route::kRevoke : Route::kRoll;
        allow = "POST";
    } else {
        return json_error(404, "NOT_FOUND", "No such endpoint");
    }
    if (!method_allowed(req.method, allow)) return method_not_allowed(allow);

    HttpResponse denied;
    std::optional<Id> account = authenticate(store_, req, denied);
    if (!account) return denied;
    const Actor actor = Actor::console(*account, req.client_address);

    HttpResponse res;
    switch (route) {
    case Route::kKeys:
        res = req.method == "POST" ? keys_.create_key(*account, actor, req) : keys_.list_keys(*account, req);
        break;
    case Route::kKey:
        res = req.method == "GET" ? keys_.get_key(*account, id) : keys_.update_key(*account, actor, id, req);
        break;
    case Route::kRevoke: res = keys_.revoke_key(*account, actor, id); break;
    case Route::kRoll: res = keys_.roll_key(*account, actor, id, req); break;
    case Route::kAudit: res = list_audit(*account, req); break;
    case Route::kAccount: res = keys_.get_account(*account); break;
    case Route::kUsage: res = usage_answer(store_, usage_, *account, req); break;
    }
    res.account = id_to_string(kAccountIdPrefix, *account);
    return res;
}

HttpResponse ConsoleApi::list_audit(const Id &account, const HttpRequest &req) {
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(req, kEventIdPrefix, limit, after)) return *r;
    AuditPage page = store_.list_audit(account, limit, after);
    json events = json::array();
    for (const auto &e : page.events) events.push_back(audit_to_json(e));
    json next = page.next ? json(id_to_string(kEventIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"events", events}, {"nextCursor", next}});
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

}  // namespace keyauth
