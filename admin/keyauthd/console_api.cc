#include "console_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>

#include "auth_header.h"
#include "key_json.h"
#include "quota_json.h"
#include "rfc3339.h"
#include "strict_json.h"
#include "usage_api.h"

namespace keyauth {
namespace {

using nlohmann::json;

const std::string kKeysPath = "/v1/keys";
const std::string kAuditPath = "/v1/audit";
const std::string kAccountPath = "/v1/account";
const std::string kUsagePath = "/v1/usage";

HttpResponse json_response(int status, const json &body) { return keyauth::json_response(status, body.dump()); }

HttpResponse invalid(const std::string &field, const std::string &message) {
    return json_error(400, "VALIDATION_ERROR", message, field);
}

HttpResponse method_not_allowed(const char *allow) {
    HttpResponse r = json_error(405, "METHOD_NOT_ALLOWED", "Method not allowed here");
    r.headers.emplace_back("Allow", allow);
    return r;
}

bool is_json_media_type(const std::string &content_type) {
    std::string type = content_type.substr(0, content_type.find(';'));
    type.erase(std::remove(type.begin(), type.end(), ' '), type.end());
    std::transform(type.begin(), type.end(), type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return type == "application/json";
}

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

std::optional<size_t> parse_limit(const std::string &text) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v < 1 ||
        v > ConsoleApi::kMaxPage) {
        return std::nullopt;
    }
    return v;
}

}  // namespace

HttpResponse ConsoleApi::handle(const HttpRequest &req) noexcept {
    std::string detail;
    try {
        return route(req);
    } catch (const StoreError &e) {
        switch (e.kind()) {
        case StoreError::Kind::kInvalid: return invalid(e.field(), e.what());
        case StoreError::Kind::kNotFound: return json_error(404, "KEY_NOT_FOUND", "No such key");
        case StoreError::Kind::kConflict:
            return json_error(409, e.code().empty() ? "CONFLICT" : e.code(), e.what());
        case StoreError::Kind::kForbidden: return json_error(403, e.code(), e.what(), e.field());
        case StoreError::Kind::kBusy: return json_error(503, "STORE_BUSY", e.what());
        case StoreError::Kind::kUnavailable: {
            HttpResponse r = json_error(503, "STORE_UNAVAILABLE",
                                        "The key store cannot be reached; try again shortly");
            r.headers.emplace_back("Retry-After", "1");
            r.internal_error = e.what();
            return r;
        }
        case StoreError::Kind::kCorrupt: break;
        }
    } catch (const MapFullError &e) {
        // the map filled and the disk (or the limit) leaves it no room to grow;
        // the log gets the store, its map size and what to do
        HttpResponse r = json_error(507, "STORE_FULL",
                                    "The key store is full and its disk has no room to grow it; nothing was written");
        r.internal_error = e.what();
        return r;
    } catch (const lmdb::map_full_error &e) {
        HttpResponse r = json_error(507, "STORE_FULL", "The key store is full; nothing was written");
        r.internal_error = e.what();
        return r;
    } catch (const lmdb::error &e) {
        if (e.code() == MDB_MAP_RESIZED) {
            // another writer grew the map past this daemon's, which adopts
            // it at the next transaction: this one may be retried
            HttpResponse r = json_error(503, "STORE_UNAVAILABLE",
                                        "The key store was resized under this request; retry");
            r.headers.emplace_back("Retry-After", "1");
            r.internal_error = e.what();
            return r;
        }
        // A full disk shows as ENOSPC, or as EIO when LMDB's write came up
        // short; either way the transaction was not committed.
        if (e.code() == ENOSPC || e.code() == EIO) {
            HttpResponse r = json_error(
                507, "STORE_FULL", "The disk holding the key store is full; nothing was written");
            r.internal_error = e.what();
            return r;
        }
        detail = e.what();
    } catch (const std::exception &e) {
        detail = e.what();
    } catch (...) {
        detail = "unknown exception";
    }
    try {
        HttpResponse r = json_error(500, "INTERNAL_ERROR", "The request could not be completed");
        r.internal_error = detail;
        return r;
    } catch (...) {
        HttpResponse r;
        r.status = 500;
        return r;
    }
}

// The JSON object body of a write, or the answer that refuses it.
std::optional<json> ConsoleApi::object_body(const HttpRequest &req, HttpResponse &refused) {
    if (!is_json_media_type(req.content_type)) {
        refused = json_error(415, "UNSUPPORTED_MEDIA_TYPE",
                             "The body must be JSON: Content-Type: application/json");
        return std::nullopt;
    }
    if (req.body.size() > kMaxBody) {
        refused = json_error(413, "PAYLOAD_TOO_LARGE", "The body is larger than 64 KiB");
        return std::nullopt;
    }
    std::string duplicate;
    json body = parse_json_strict(req.body, duplicate);
    if (!duplicate.empty()) {
        refused = invalid(duplicate, "Field \"" + duplicate + "\" appears more than once");
    } else if (body.is_discarded()) {
        refused = invalid("body", "The body is not valid JSON (or not valid UTF-8)");
    } else if (!body.is_object()) {
        refused = invalid("body", "The body must be a JSON object");
    } else {
        return body;
    }
    return std::nullopt;
}

namespace {

// Field readers: each returns the refusal naming the field, or nothing.
std::optional<HttpResponse> read_name(const json &v, std::string &out) {
    if (!v.is_string()) return invalid("name", "name must be a string");
    out = v.get<std::string>();
    return std::nullopt;
}

std::optional<HttpResponse> read_scopes(const json &v, std::vector<std::string> &out) {
    if (!v.is_array()) return invalid("scopes", "scopes must be an array of strings");
    if (v.size() > KA_SCOPES_MAX) return invalid("scopes", "at most " + std::to_string(KA_SCOPES_MAX) + " scopes");
    out.clear();
    for (const auto &s : v) {
        if (!s.is_string()) return invalid("scopes", "scopes must be an array of strings");
        out.push_back(s.get<std::string>());
    }
    return std::nullopt;
}

std::optional<HttpResponse> read_rate(const json &v, uint32_t &out) {
    if (!v.is_number_integer())
        return invalid("rateLimitPerMinute", "rateLimitPerMinute must be an integer");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > kMaxRatePerMinute : v.get<int64_t>() < 1)
        return invalid("rateLimitPerMinute",
                       "rateLimitPerMinute must be an integer from 1 to " + std::to_string(kMaxRatePerMinute));
    out = static_cast<uint32_t>(v.get<int64_t>());
    return std::nullopt;
}

// expiresAt: an RFC 3339 time, or null (never) where allow_null. The epoch
// is a time like any other (in the past, so refused), never "never".
std::optional<HttpResponse> read_expiry(const json &v, bool allow_null, Expiry &out) {
    if (v.is_null() && allow_null) {
        out = std::nullopt;
        return std::nullopt;
    }
    std::optional<int64_t> t;
    if (v.is_string()) t = parse_time(v.get<std::string>());
    if (!t)
        return invalid("expiresAt", std::string("expiresAt must be an RFC 3339 time such as "
                                                "2027-01-31T12:00:00Z") + (allow_null ? ", or null" : ""));
    out = *t;
    return std::nullopt;
}

std::optional<HttpResponse> only_fields(const json &body, const std::set<std::string> &fields,
                                        const char *expected) {
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (!fields.count(it.key()))
            return invalid(it.key(), "Unknown field \"" + it.key() + "\"; expected " + expected);
    }
    return std::nullopt;
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

HttpResponse key_not_found() { return json_error(404, "KEY_NOT_FOUND", "No such key"); }

}  // namespace

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
    if ((", " + std::string(allow) + ",").find(", " + req.method + ",") == std::string::npos) {
        return method_not_allowed(allow);
    }

    HttpResponse denied;
    std::optional<Id> account = authenticate(store_, req, denied);
    if (!account) return denied;
    const Actor actor = Actor::console(*account, req.client_address);

    HttpResponse res;
    switch (route) {
    case Route::kKeys: res = req.method == "POST" ? create_key(*account, actor, req) : list_keys(*account, req); break;
    case Route::kKey: res = req.method == "GET" ? get_key(*account, id) : update_key(*account, actor, id, req); break;
    case Route::kRevoke: res = revoke_key(*account, actor, id); break;
    case Route::kRoll: res = roll_key(*account, actor, id, req); break;
    case Route::kAudit: res = list_audit(*account, req); break;
    case Route::kAccount: res = get_account(*account); break;
    case Route::kUsage: res = usage_answer(store_, usage_, *account, req); break;
    }
    res.account = id_to_string(kAccountIdPrefix, *account);
    return res;
}

json ConsoleApi::key_json(const KeyRecord &key, uint32_t entitlement) {
    const int64_t now = store_.now();
    // a key's quota is counted under its roll chain's rate id (quota_usage.h)
    return key_to_json(key, entitlement, now,
                       quota_used_of(quota_, QuotaSubject::kKey, quota_subject_id(key), key.quota, now));
}

// Usage comes from the edges' collections, not from the store: if it cannot
// be read (etcd down, a damaged usage store), the keys are still answered,
// with their usage null, and the daemon's log says why.
std::string ConsoleApi::add_usage(const Id &account, const std::vector<KeyRecord> &keys, json &objects) {
    if (!usage_ || keys.empty()) return "";
    std::vector<Id> ids;
    for (const auto &k : keys) ids.push_back(k.key_id);
    try {
        std::map<Id, KeyUsage> found = usage_->usage_of(account, ids);
        for (size_t i = 0; i < keys.size(); i++) {
            json &obj = objects.is_array() ? objects[i] : objects;
            auto it = found.find(keys[i].key_id);
            set_usage(obj, it == found.end() ? KeyUsage{} : it->second);
        }
    } catch (const std::exception &e) {
        for (size_t i = 0; i < keys.size(); i++) {
            json &obj = objects.is_array() ? objects[i] : objects;
            obj["usage"] = nullptr;
        }
        return std::string("usage not read: ") + e.what();
    }
    return "";
}

uint32_t ConsoleApi::entitlement_of(const Id &account) {
    auto acc = store_.find_account_on_plan(account);
    return acc ? acc->effective.rate_rpm : 0;
}

// The caller's account: its plan and effective values, and what its quota
// used this period.
HttpResponse ConsoleApi::get_account(const Id &account) {
    auto acc = store_.find_account_on_plan(account);
    if (!acc) return json_error(404, "NOT_FOUND", "No such account");
    const int64_t now = store_.now();
    const auto used = quota_used_of(quota_, QuotaSubject::kAccount, account, acc->effective.quota, now);
    HttpResponse r = json_response(200, account_to_json(*acc, used, now));
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse ConsoleApi::create_key(const Id &account, const Actor &actor, const HttpRequest &req) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"name", "scopes", "rateLimitPerMinute", "expiresAt", "quota"},
                             "name, scopes, rateLimitPerMinute, expiresAt, quota"))
        return *r;
    for (const char *f : {"name", "scopes", "rateLimitPerMinute"}) {
        if (!body.contains(f)) return invalid(f, std::string("Missing field \"") + f + "\"");
    }
    KeySpec spec;
    if (auto r = read_name(body["name"], spec.name)) return *r;
    if (auto r = read_scopes(body["scopes"], spec.scopes)) return *r;
    if (auto r = read_rate(body["rateLimitPerMinute"], spec.requested_rpm)) return *r;
    if (body.contains("expiresAt")) {
        if (auto r = read_expiry(body["expiresAt"], false, spec.expires_at)) return *r;
    }
    if (body.contains("quota")) spec.quota = quota_from_json(body["quota"], QuotaOwner::kKey, "quota");
    // Read before the write: once the key is committed, nothing may fail
    // between it and the one answer that carries its secret.
    const uint32_t entitlement = entitlement_of(account);
    CreatedKey made = store_.create_key(account, spec, actor);
    json out = key_json(made.key, entitlement);
    out["secret"] = made.secret;
    HttpResponse r = json_response(201, out);
    r.headers.emplace_back("Cache-Control", "no-store");  // the one and only copy of the secret
    return r;
}

std::optional<HttpResponse> ConsoleApi::page_args(const HttpRequest &req, std::string_view id_prefix,
                                                  size_t &limit, std::optional<Id> &after) {
    limit = kDefaultPage;
    if (req.has_limit) {
        auto parsed = parse_limit(req.query_limit);
        if (!parsed) return invalid("limit", "limit must be an integer from 1 to " + std::to_string(kMaxPage));
        limit = *parsed;
    }
    if (req.has_cursor) {
        Id id{};
        if (!parse_id(id_prefix, req.query_cursor, id))
            return invalid("cursor", "cursor must be a nextCursor value from an earlier page");
        after = id;
    }
    return std::nullopt;
}

HttpResponse ConsoleApi::list_keys(const Id &account, const HttpRequest &req) {
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(req, kKeyIdPrefix, limit, after)) return *r;
    KeyPage page = store_.list_keys(account, limit, after);
    const uint32_t entitlement = entitlement_of(account);
    json keys = json::array();
    for (const auto &k : page.keys) keys.push_back(key_json(k, entitlement));
    std::string usage_error = add_usage(account, page.keys, keys);
    json next = page.next ? json(id_to_string(kKeyIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"keys", keys}, {"nextCursor", next}});
    r.internal_error = std::move(usage_error);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

// One key, with its usage.
HttpResponse ConsoleApi::one_key(const Id &account, const KeyRecord &key, int status) {
    json obj = key_json(key, entitlement_of(account));
    std::string usage_error = add_usage(account, {key}, obj);
    HttpResponse r = json_response(status, obj);
    r.internal_error = std::move(usage_error);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse ConsoleApi::get_key(const Id &account, const std::string &id_text) {
    Id id{};
    // An id that cannot exist and another account's key look the same.
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    auto key = store_.find_key(id);
    if (!key || key->account_id != account) return key_not_found();
    return one_key(account, *key, 200);
}

HttpResponse ConsoleApi::update_key(const Id &account, const Actor &actor, const std::string &id_text,
                                    const HttpRequest &req) {
    Id id{};
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    HttpResponse refused;
    std::optional<json> parsed = object_body(req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"name", "scopes", "rateLimitPerMinute", "expiresAt", "quota"},
                             "any of name, scopes, rateLimitPerMinute, expiresAt, quota"))
        return *r;
    if (body.empty())
        return invalid("body", "Give at least one of name, scopes, rateLimitPerMinute, expiresAt, quota");
    KeyChanges changes;
    if (body.contains("name")) {
        if (auto r = read_name(body["name"], changes.name.emplace())) return *r;
    }
    if (body.contains("scopes")) {
        if (auto r = read_scopes(body["scopes"], changes.scopes.emplace())) return *r;
    }
    if (body.contains("rateLimitPerMinute")) {
        if (auto r = read_rate(body["rateLimitPerMinute"], changes.requested_rpm.emplace())) return *r;
    }
    if (body.contains("expiresAt")) {
        if (auto r = read_expiry(body["expiresAt"], true, changes.expires_at.emplace())) return *r;
    }
    // null removes the key's own quota
    if (body.contains("quota")) changes.quota = quota_from_json(body["quota"], QuotaOwner::kKey, "quota");
    return one_key(account, store_.update_key(account, id, changes, actor), 200);
}

HttpResponse ConsoleApi::revoke_key(const Id &account, const Actor &actor, const std::string &id_text) {
    Id id{};
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    return one_key(account, store_.revoke_key(account, id, actor), 200);
}

HttpResponse ConsoleApi::roll_key(const Id &account, const Actor &actor, const std::string &id_text,
                                  const HttpRequest &req) {
    Id id{};
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    int64_t grace = 0;
    // The body is optional: none rolls with no grace.
    if (!req.body.empty()) {
        HttpResponse refused;
        std::optional<json> parsed = object_body(req, refused);
        if (!parsed) return refused;
        const json &body = *parsed;
        if (auto r = only_fields(body, {"gracePeriodSeconds"}, "gracePeriodSeconds")) return *r;
        if (body.contains("gracePeriodSeconds")) {
            const json &g = body["gracePeriodSeconds"];
            if (!g.is_number_integer() ||
                (g.is_number_unsigned() ? g.get<uint64_t>() > uint64_t(Store::kMaxGraceSeconds) : g.get<int64_t>() < 0))
                return invalid("gracePeriodSeconds", "gracePeriodSeconds must be an integer from 0 to 604800");
            grace = g.get<int64_t>();
        }
    }
    const uint32_t entitlement = entitlement_of(account);
    RolledKey rolled = store_.roll_key(account, id, grace, actor);
    json out = key_json(rolled.successor.key, entitlement);
    out["secret"] = rolled.successor.secret;
    HttpResponse r = json_response(201, out);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
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
