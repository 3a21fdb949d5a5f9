#include "admin_api.h"

#include <nlohmann/json.hpp>

#include "accept_header.h"
#include "api_support.h"
#include "auth_header.h"
#include "catalog_json.h"
#include "key_json.h"
#include "leak_outcome.h"
#include "leak_report.h"
#include "money.h"
#include "quota_json.h"
#include "restrictions.h"
#include "rfc3339.h"
#include "url.h"
#include "usage_api.h"
#include "usage_report.h"
#include "validation.h"

namespace keyauth {

using nlohmann::json;

const AdminApi::Route AdminApi::kRoutes[] = {
    {"POST", "/v1/admin/accounts", kScopeAccountsWrite, &AdminApi::create_account},
    {"GET", "/v1/admin/accounts", kScopeAccountsRead, &AdminApi::list_accounts},
    {"GET", "/v1/admin/accounts/{id}", kScopeAccountsRead, &AdminApi::get_account},
    {"PATCH", "/v1/admin/accounts/{id}", kScopeAccountsWrite, &AdminApi::update_account},
    {"PUT", "/v1/admin/accounts/{id}/plan", kScopeAccountsPlan, &AdminApi::put_plan},
    {"POST", "/v1/admin/accounts/{id}/sessions", kScopeSessionsWrite, &AdminApi::create_session},
    {"GET", "/v1/admin/accounts/{id}/keys", kScopeKeysRead, &AdminApi::list_account_keys},
    {"POST", "/v1/admin/accounts/{id}/keys", kScopeKeysWrite, &AdminApi::create_account_key},
    {"GET", "/v1/admin/keys/{id}", kScopeKeysRead, &AdminApi::get_key},
    {"PATCH", "/v1/admin/keys/{id}", kScopeKeysWrite, &AdminApi::update_key},
    {"POST", "/v1/admin/keys/{id}/roll", kScopeKeysWrite, &AdminApi::roll_key},
    {"POST", "/v1/admin/keys/{id}/revoke", kScopeKeysWrite, &AdminApi::revoke_key},
    {"POST", "/v1/admin/keys/report-leak", kScopeKeysWrite, &AdminApi::report_leak},
    {"GET", "/v1/admin/usage", kScopeUsageRead, &AdminApi::get_usage},
    {"GET", "/v1/admin/usage/report", kScopeUsageRead, &AdminApi::get_usage_report},
    {"GET", "/v1/admin/audit", kScopeAuditRead, &AdminApi::list_audit},
    {"PUT", "/v1/admin/plans", kScopePlansWrite, &AdminApi::put_plans},
    {"PUT", "/v1/admin/fx", kScopeFxWrite, &AdminApi::put_fx},
    {"POST", "/v1/admin/webhooks", kScopeWebhooksWrite, &AdminApi::create_webhook},
    {"GET", "/v1/admin/webhooks", kScopeWebhooksWrite, &AdminApi::list_webhooks},
    {"DELETE", "/v1/admin/webhooks/{id}", kScopeWebhooksWrite, &AdminApi::delete_webhook},
    {"GET", "/v1/admin/webhooks/{id}/deliveries", kScopeWebhooksWrite, &AdminApi::list_webhook_deliveries},
};

namespace {

// Whether `path` is an instance of `pattern`; its {id} segments into params.
bool matches(std::string_view pattern, std::string_view path, std::vector<std::string> *params) {
    while (!pattern.empty() || !path.empty()) {
        if (pattern.empty() || path.empty() || pattern[0] != '/' || path[0] != '/') return false;
        pattern.remove_prefix(1);
        path.remove_prefix(1);
        const std::string_view want = pattern.substr(0, pattern.find('/'));
        const std::string_view got = path.substr(0, path.find('/'));
        if (want == "{id}") {
            if (got.empty()) return false;
            if (params) params->emplace_back(got);
        } else if (want != got) {
            return false;
        }
        pattern.remove_prefix(want.size());
        path.remove_prefix(got.size());
    }
    return true;
}

HttpResponse account_not_found() { return json_error(404, "ACCOUNT_NOT_FOUND", "No such account"); }
HttpResponse key_not_found() { return json_error(404, "KEY_NOT_FOUND", "No such key"); }

std::optional<AdminToken> authenticate(Store &store, const HttpRequest &req, HttpResponse &denied) {
    std::string_view token;
    const BearerParse parsed = req.has_authorization ? parse_bearer(req.authorization, token) : BearerParse::kMissing;
    if (parsed == BearerParse::kMissing) {
        denied = json_error(401, "ADMIN_TOKEN_REQUIRED", "An admin token is required: Authorization: Bearer <token>");
        denied.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"admin\"");
        return std::nullopt;
    }
    std::optional<AdminToken> t;
    if (parsed == BearerParse::kFound) t = store.admin_login(token);
    if (!t) {
        denied = json_error(401, "INVALID_ADMIN_TOKEN", "The admin token is invalid, revoked or expired");
        denied.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"admin\", error=\"invalid_token\"");
        return std::nullopt;
    }
    return t;
}

HttpResponse scope_required(uint32_t scope) {
    const std::string name = admin_scope_name(scope);
    HttpResponse r = json_response(403, json{{"error", {{"code", "ADMIN_SCOPE_REQUIRED"},
                                                         {"message", "This admin token lacks the scope " + name},
                                                         {"scope", name}}}});
    r.headers.emplace_back("WWW-Authenticate",
                           "Bearer realm=\"admin\", error=\"insufficient_scope\", scope=\"" + name + "\"");
    return r;
}

// maxKeys: 1 to the limit, or "plan" where plan_ok (follow the plan's).
std::optional<HttpResponse> read_max_keys(const json &v, bool plan_ok, std::optional<uint32_t> &out, bool &plan) {
    if (plan_ok && v == "plan") {
        plan = true;
        return std::nullopt;
    }
    if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() > KA_MAX_KEYS_LIMIT : v.get<int64_t>() < 1))
        return invalid("maxKeys", "maxKeys must be an integer from 1 to " + std::to_string(KA_MAX_KEYS_LIMIT) +
                                      (plan_ok ? ", or \"plan\"" : ""));
    out = static_cast<uint32_t>(v.get<uint64_t>());
    return std::nullopt;
}

// allowedScopes: a list (empty: any scope) or null (any scope).
std::optional<HttpResponse> read_allowed_scopes(const json &v, std::optional<std::vector<std::string>> &out) {
    if (v.is_null()) {
        out.emplace();
        return std::nullopt;
    }
    if (!v.is_array() || v.size() > KA_SCOPES_MAX)
        return invalid("allowedScopes", "allowedScopes must be an array of at most " +
                                            std::to_string(KA_SCOPES_MAX) + " scopes, or null");
    out.emplace();
    for (const auto &s : v) {
        if (!s.is_string()) return invalid("allowedScopes", "allowedScopes must be an array of strings");
        out->push_back(s.get<std::string>());
    }
    return std::nullopt;
}

// An optional string field: a string, or null where null_ok.
std::optional<HttpResponse> read_text(const json &v, const char *field, bool null_ok,
                                      std::optional<std::string> &out) {
    if (v.is_null() && null_ok) return std::nullopt;
    if (!v.is_string())
        return invalid(field, std::string(field) + " must be a string" + (null_ok ? ", or null" : ""));
    out = v.get<std::string>();
    return std::nullopt;
}

}  // namespace

std::string_view admin_route_template(std::string_view path) noexcept {
    for (const AdminApi::Route &r : AdminApi::kRoutes) {
        if (matches(r.path, path, nullptr)) return r.path;
    }
    return "other";
}

HttpResponse AdminApi::handle(const HttpRequest &req) noexcept {
    return answer_or_error([&] { return route(req); }, "NOT_FOUND");
}

HttpResponse AdminApi::route(const HttpRequest &req) {
    const Route *found = nullptr;
    std::string allow;
    std::vector<std::string> params;
    for (const Route &r : kRoutes) {
        std::vector<std::string> p;
        if (!matches(r.path, req.path, &p)) continue;
        allow += (allow.empty() ? "" : ", ") + std::string(r.method);
        if (req.method == r.method) {
            found = &r;
            params = std::move(p);
        }
    }
    if (allow.empty()) return json_error(404, "NOT_FOUND", "No such endpoint");
    if (found == nullptr) return method_not_allowed(allow.c_str());

    HttpResponse denied;
    std::optional<AdminToken> token = authenticate(store_, req, denied);
    if (!token) return denied;
    const std::string who = id_to_string(kAdminTokenIdPrefix, token->id);
    HttpResponse res;
    if (!admin_scopes_grant(token->scopes, found->scope)) {
        res = scope_required(found->scope);
    } else {
        const Call call{req, *token, Actor::admin(token->id, token->name, req.client_address), std::move(params)};
        res = (this->*(found->handler))(call);
    }
    res.account = who;
    return res;
}

std::optional<Id> AdminApi::account_param(const Call &c, HttpResponse &missing) {
    Id id{};
    if (!parse_id(kAccountIdPrefix, c.params.at(0), id) || !store_.find_account(id)) {
        missing = account_not_found();
        return std::nullopt;
    }
    return id;
}

std::optional<Id> AdminApi::key_owner(const Call &c, HttpResponse &missing) {
    Id id{};
    std::optional<KeyRecord> key;
    if (parse_id(kKeyIdPrefix, c.params.at(0), id)) key = store_.find_key(id);
    if (!key) {
        missing = key_not_found();
        return std::nullopt;
    }
    return key->account_id;
}

HttpResponse AdminApi::account_answer(const Id &account, int status) {
    HttpResponse r = keys_.get_account(account);
    if (r.status != 200) return account_not_found();
    json body = json::parse(r.body);
    const auto external = store_.external_id_of(account);
    body["externalId"] = external ? json(*external) : json(nullptr);
    HttpResponse out = json_response(status, body);
    out.headers.emplace_back("Cache-Control", "no-store");
    return out;
}

HttpResponse AdminApi::create_account(const Call &c) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"name", "externalId", "planId", "rateLimitPerMinute", "maxKeys", "allowedScopes", "quota",
                                    "allowedIps", "meta"},
                             "name, externalId, planId, rateLimitPerMinute, maxKeys, allowedScopes, quota, allowedIps, meta"))
        return *r;
    if (!body.contains("name")) return invalid("name", "Missing field \"name\"");
    std::string name;
    if (auto r = read_name(body["name"], name)) return *r;
    AccountChanges controls;
    uint32_t rate = 0;
    if (body.contains("externalId")) {
        std::optional<std::string> ext;
        if (auto r = read_text(body["externalId"], "externalId", true, ext)) return *r;
        controls.external_id = ext;
    }
    if (body.contains("planId")) {
        std::optional<std::string> plan;
        if (auto r = read_text(body["planId"], "planId", false, plan)) return *r;
        controls.plan_id = plan;
    }
    if (body.contains("rateLimitPerMinute")) {
        if (auto r = read_rate(body["rateLimitPerMinute"], rate)) return *r;
    } else if (!controls.plan_id) {
        return invalid("rateLimitPerMinute", "Give rateLimitPerMinute, or planId to follow the plan's rate");
    }
    if (body.contains("maxKeys")) {
        bool plan = false;
        if (auto r = read_max_keys(body["maxKeys"], false, controls.max_keys, plan)) return *r;
    }
    if (body.contains("allowedScopes")) {
        if (auto r = read_allowed_scopes(body["allowedScopes"], controls.allowed_scopes)) return *r;
    }
    if (body.contains("quota")) controls.quota = quota_from_json(body["quota"], QuotaOwner::kAccountOrPlan, "quota");
    if (body.contains("allowedIps")) controls.allowed_ips = allowed_ips_from_json(body["allowedIps"], "allowedIps");
    if (body.contains("meta")) controls.meta = meta_from_json(body["meta"], "meta");
    try {
        CreatedAccount made = store_.create_account(name, rate, controls, c.actor);
        return account_answer(made.account.id, 201);
    } catch (const StoreError &e) {
        if (e.code() != "EXTERNAL_ID_TAKEN") throw;
        // a retried signup finds its account instead of making two
        json err = {{"code", e.code()}, {"message", e.what()}, {"field", "externalId"}};
        if (auto holder = store_.find_account_by_external_id(**controls.external_id))
            err["accountId"] = id_to_string(kAccountIdPrefix, *holder);
        return json_response(409, json{{"error", err}});
    }
}

HttpResponse AdminApi::list_accounts(const Call &c) {
    std::map<std::string, std::string> q;
    if (auto r = query_args(c.req, {"limit", "cursor", "externalId"}, q)) return *r;
    json accounts = json::array();
    json next = nullptr;
    // checked with externalId too: a bad limit or cursor is the caller's
    // mistake either way, even though one account fits any page
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(c.req, kAccountIdPrefix, limit, after)) return *r;
    auto it = q.find("externalId");
    if (it != q.end()) {
        if (auto id = store_.find_account_by_external_id(it->second)) {
            accounts.push_back(json::parse(account_answer(*id, 200).body));
        }
    } else {
        AccountPage page = store_.list_accounts_page(limit, after);
        for (const Account &a : page.accounts) accounts.push_back(json::parse(account_answer(a.id, 200).body));
        if (page.next) next = id_to_string(kAccountIdPrefix, *page.next);
    }
    HttpResponse r = json_response(200, json{{"accounts", accounts}, {"nextCursor", next}});
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse AdminApi::get_account(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    return id ? account_answer(*id, 200) : missing;
}

HttpResponse AdminApi::update_account(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    if (!id) return missing;
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    const char *expected = "any of name, externalId, rateLimitPerMinute, maxKeys, allowedScopes, quota, allowedIps, meta, status";
    if (auto r = only_fields(body, {"name", "externalId", "rateLimitPerMinute", "maxKeys", "allowedScopes", "quota",
                                    "allowedIps", "meta", "status"},
                             expected))
        return *r;
    if (body.empty()) return invalid("body", std::string("Give ") + expected);
    if (body.contains("status")) {
        // a suspension or a resume is a change of its own, with its own event
        if (body.size() != 1) return invalid("status", "status is changed alone, in a request of its own");
        const json &s = body["status"];
        if (s != "active" && s != "suspended") return invalid("status", "status must be \"active\" or \"suspended\"");
        store_.set_suspended(*id, s == "suspended", c.actor);
        return account_answer(*id, 200);
    }
    AccountChanges changes;
    if (body.contains("name")) {
        if (auto r = read_name(body["name"], changes.name.emplace())) return *r;
    }
    if (body.contains("externalId")) {
        std::optional<std::string> ext;
        if (auto r = read_text(body["externalId"], "externalId", true, ext)) return *r;
        changes.external_id = ext;
    }
    if (body.contains("rateLimitPerMinute")) {
        if (body["rateLimitPerMinute"] == "plan") {
            changes.follow_plan |= KA_OVERRIDE_RATE;
        } else if (auto r = read_rate(body["rateLimitPerMinute"], changes.entitlement_rpm.emplace())) {
            return *r;
        }
    }
    if (body.contains("maxKeys")) {
        bool plan = false;
        if (auto r = read_max_keys(body["maxKeys"], true, changes.max_keys, plan)) return *r;
        if (plan) changes.follow_plan |= KA_OVERRIDE_MAX_KEYS;
    }
    if (body.contains("allowedScopes")) {
        if (auto r = read_allowed_scopes(body["allowedScopes"], changes.allowed_scopes)) return *r;
    }
    if (body.contains("quota")) {
        if (body["quota"] == "plan") changes.follow_plan |= KA_OVERRIDE_QUOTA;
        else changes.quota = quota_from_json(body["quota"], QuotaOwner::kAccountOrPlan, "quota");
    }
    if (body.contains("allowedIps")) changes.allowed_ips = allowed_ips_from_json(body["allowedIps"], "allowedIps");
    if (body.contains("meta")) changes.meta = meta_from_json(body["meta"], "meta");
    try {
        store_.update_account(*id, changes, c.actor);
    } catch (const StoreError &e) {
        if (e.code() != "EXTERNAL_ID_TAKEN") throw;
        json err = {{"code", e.code()}, {"message", e.what()}, {"field", "externalId"}};
        if (auto holder = store_.find_account_by_external_id(**changes.external_id))
            err["accountId"] = id_to_string(kAccountIdPrefix, *holder);
        return json_response(409, json{{"error", err}});
    }
    return account_answer(*id, 200);
}

HttpResponse AdminApi::put_plan(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    if (!id) return missing;
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"planId", "orderId"}, "planId, orderId")) return *r;
    if (!body.contains("planId")) return invalid("planId", "Missing field \"planId\" (a plan's id, or null for none)");
    std::optional<std::string> plan, order;
    if (auto r = read_text(body["planId"], "planId", true, plan)) return *r;
    if (body.contains("orderId")) {
        if (auto r = read_text(body["orderId"], "orderId", true, order)) return *r;
        if (order) validate_label(*order, "orderId", KA_NAME_MAX_LEN);
    }
    // the same plan again (a retried webhook of the payment service)
    // changes nothing and records nothing
    store_.set_plan(*id, plan, c.actor, order.value_or(""));
    return account_answer(*id, 200);
}

HttpResponse AdminApi::create_session(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    if (!id) return missing;
    int64_t ttl = 3600;
    if (!c.req.body.empty()) {
        HttpResponse refused;
        std::optional<json> parsed = object_body(c.req, refused);
        if (!parsed) return refused;
        const json &body = *parsed;
        if (auto r = only_fields(body, {"ttlSeconds"}, "ttlSeconds")) return *r;
        if (body.contains("ttlSeconds")) {
            const json &t = body["ttlSeconds"];
            if (!t.is_number_integer() || (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(Store::kMaxSessionSeconds)
                                                                   : t.get<int64_t>() < Store::kMinSessionSeconds))
                return invalid("ttlSeconds", "ttlSeconds must be an integer from 60 to 86400");
            ttl = t.get<int64_t>();
        }
    }
    ConsoleSession s = store_.create_console_session(*id, ttl, c.actor);
    HttpResponse r = json_response(201, json{{"token", s.token}, {"expiresAt", format_time(s.expires_ms)}});
    r.headers.emplace_back("Cache-Control", "no-store");  // the one copy of the token
    return r;
}

HttpResponse AdminApi::list_account_keys(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    return id ? keys_.list_keys(*id, c.req) : missing;
}

HttpResponse AdminApi::create_account_key(const Call &c) {
    HttpResponse missing;
    auto id = account_param(c, missing);
    return id ? keys_.create_key(*id, c.actor, c.req) : missing;
}

HttpResponse AdminApi::get_key(const Call &c) {
    HttpResponse missing;
    auto owner = key_owner(c, missing);
    return owner ? keys_.get_key(*owner, c.params.at(0)) : missing;
}

HttpResponse AdminApi::update_key(const Call &c) {
    HttpResponse missing;
    auto owner = key_owner(c, missing);
    return owner ? keys_.update_key(*owner, c.actor, c.params.at(0), c.req) : missing;
}

HttpResponse AdminApi::roll_key(const Call &c) {
    HttpResponse missing;
    auto owner = key_owner(c, missing);
    return owner ? keys_.roll_key(*owner, c.actor, c.params.at(0), c.req) : missing;
}

HttpResponse AdminApi::revoke_key(const Call &c) {
    HttpResponse missing;
    auto owner = key_owner(c, missing);
    return owner ? keys_.revoke_key(*owner, c.actor, c.params.at(0)) : missing;
}

// A secret the business's own scanner or support desk found: the same step
// as GitHub's reports (leak_api.h), with this token's name as the source
// unless the body names one.
HttpResponse AdminApi::report_leak(const Call &c) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"secret", "url", "source"}, "secret, url, source")) return *r;
    if (!body.contains("secret") || !body["secret"].is_string() || body["secret"].get_ref<const std::string &>().empty())
        return invalid("secret", "secret must be the reported key or token, a string");
    // the token's name, cut to a source's bound on a character's edge
    std::string name = c.token.name.substr(0, kMaxLeakSourceBytes);
    if (name.size() < c.token.name.size())
        while (!name.empty() && (static_cast<unsigned char>(c.token.name[name.size()]) & 0xc0) == 0x80) name.pop_back();
    LeakReportOrigin origin{name, ""};
    for (const char *field : {"url", "source"}) {
        if (!body.contains(field)) continue;
        if (!body[field].is_string()) return invalid(field, std::string(field) + " must be a string");
        (field[0] == 'u' ? origin.url : origin.source) = body[field].get<std::string>();
    }
    if (origin.source.empty()) return invalid("source", "source must not be empty");
    const std::string &secret = body["secret"].get_ref<const std::string &>();
    if (secret.size() > kMaxReportedTokenBytes)
        return invalid("secret", "secret is over 256 bytes: no key or token is that long");
    return json_response(200, reported_secret_json(report_secret(store_, secret, "", leak_action_, origin, c.actor)));
}

HttpResponse AdminApi::list_audit(const Call &c) {
    std::map<std::string, std::string> q;
    if (auto r = query_args(c.req, {"limit", "cursor", "accountId"}, q)) return *r;
    std::optional<Id> account;
    if (auto it = q.find("accountId"); it != q.end()) {
        Id id{};
        if (!parse_id(kAccountIdPrefix, it->second, id) || !store_.find_account(id)) return account_not_found();
        account = id;
    }
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(c.req, kEventIdPrefix, limit, after)) return *r;
    AuditPage page = store_.list_audit(account, limit, after);
    json events = json::array();
    for (const auto &e : page.events) events.push_back(audit_to_json(e));
    json next = page.next ? json(id_to_string(kEventIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"events", events}, {"nextCursor", next}});
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse AdminApi::put_plans(const Call &c) {
    // ?retire=OLD=NEW, as often as plans are retired: keyauthctl's --retire
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!query_params(c.req.query, pairs)) return invalid("query", "The query string cannot be decoded");
    PlanRetirements retire;
    for (const auto &[name, value] : pairs) {
        if (name != "retire") return invalid(name, "Unknown query parameter \"" + name + "\"; expected retire");
        std::string error;
        if (!add_retirement(value, retire, error)) return invalid("retire", error);
    }
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    // the catalog file's JSON, as keyauthctl plans import reads it
    std::vector<PlanRecord> plans = parse_catalog(c.req.body);
    validate_catalog(plans);
    const CatalogImport done = store_.import_plans(plans, c.actor, retire);
    json arr = json::array();
    for (const auto &p : store_.list_plans()) arr.push_back(plan_to_json(p));
    json moved = json::array();
    for (const auto &[from, count] : done.moved) moved.push_back({{"from", from}, {"to", retire.at(from)}, {"accounts", count}});
    return json_response(200, json{{"plans", arr}, {"removed", done.removed}, {"moved", moved}});
}

HttpResponse AdminApi::put_fx(const Call &c) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"usdInr"}, "usdInr")) return *r;
    uint64_t micro = 0;
    if (!body.contains("usdInr") || !body["usdInr"].is_string() || !parse_rate(body["usdInr"].get<std::string>(), micro))
        return invalid("usdInr", "usdInr must be the INR price of one USD as a decimal string, such as \"83.50\"");
    const FxRecord fx = store_.set_exchange_rate(micro, c.actor);
    char rate[kRateTextMax];
    format_rate(fx.inr_per_usd_micro, rate);
    return json_response(200, json{{"exchangeRate", rate}, {"setAt", format_time(fx.set_ms)}});
}

HttpResponse AdminApi::get_usage(const Call &c) { return admin_usage_answer(store_, usage_, c.req); }

namespace {

// The report's form from the Accept header: the one the client wants
// more, CSV where they tie or no header says; nullopt when it takes
// neither (406).
std::optional<UsageReportText::Format> report_format(const std::string &accept) {
    const double csv = accept_quality(accept, "text/csv");
    const double json_q = accept_quality(accept, "application/json");
    if (json_q > 0 && json_q > csv) return UsageReportText::Format::kJson;
    if (csv > 0) return UsageReportText::Format::kCsv;
    return std::nullopt;
}

}  // namespace

HttpResponse AdminApi::get_usage_report(const Call &c) {
    std::map<std::string, std::string> q;
    if (auto r = query_args(c.req, {"from", "to", "by", "accountId", "keyId"}, q)) return *r;
    for (const char *name : {"from", "to", "by"})
        if (!q.count(name)) return invalid(name, std::string(name) + " is required");
    UsageReportQuery query;
    if (auto bad = read_usage_report_range(q["from"], q["to"], q["by"], "", query))
        return invalid(bad->field, bad->message);
    if (q.count("accountId")) {
        Id id{};
        if (!parse_id(kAccountIdPrefix, q["accountId"], id))
            return invalid("accountId", "accountId must be an account id (acc_...)");
        if (!store_.find_account(id)) return account_not_found();
        query.account = id;
    }
    if (q.count("keyId")) {
        Id id{};
        if (!parse_id(kKeyIdPrefix, q["keyId"], id)) return invalid("keyId", "keyId must be a key id (key_...)");
        auto found = store_.find_key(id);
        if (!found || (query.account && found->account_id != *query.account)) return key_not_found();
        query.key = id;
    }
    const auto format = report_format(c.req.accept);
    if (!format) return json_error(406, "NOT_ACCEPTABLE", "The report is text/csv or application/json");

    // the counts are gathered here, so a store or usage that cannot be read
    // is still an error answer; the text follows a piece at a time
    auto text = std::make_shared<UsageReportText>(store_, usage_, query, *format);
    HttpResponse r;
    r.content_type = *format == UsageReportText::Format::kJson ? "application/json" : "text/csv; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    if (*format != UsageReportText::Format::kJson)
        r.headers.emplace_back("Content-Disposition",
                               "attachment; filename=\"usage-" + q["from"] + "-" + q["to"] + ".csv\"");
    r.stream = [text](std::string &piece) { return text->next(piece); };
    return r;
}

}  // namespace keyauth
