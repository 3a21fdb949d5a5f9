// The key routes' handlers, for the console (its own keys) and the admin
// API (any account's), on one set of rules: key_api.h.
#include "key_api.h"

#include "api_support.h"
#include "key_json.h"
#include "quota_json.h"
#include "restrictions.h"

namespace keyauth {

using nlohmann::json;

namespace {

HttpResponse key_not_found() { return json_error(404, "KEY_NOT_FOUND", "No such key"); }

}  // namespace

json KeyApi::key_json(const KeyRecord &key, uint32_t entitlement) {
    const int64_t now = store_.now();
    // a key's quota is counted under its roll chain's rate id (quota_usage.h)
    return key_to_json(key, entitlement, now,
                       quota_used_of(quota_, QuotaSubject::kKey, quota_subject_id(key), key.quota, now));
}

// Usage comes from the edges' collections, not from the store: if it cannot
// be read (etcd down, a damaged usage store), the keys are still answered,
// with their usage null, and the daemon's log says why.
std::string KeyApi::add_usage(const Id &account, const std::vector<KeyRecord> &keys, json &objects) {
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

uint32_t KeyApi::entitlement_of(const Id &account) {
    auto acc = store_.find_account_on_plan(account);
    return acc ? acc->effective.rate_rpm : 0;
}

// The caller's account: its plan and effective values, and what its quota
// used this period.
HttpResponse KeyApi::get_account(const Id &account) {
    auto acc = store_.find_account_on_plan(account);
    if (!acc) return json_error(404, "NOT_FOUND", "No such account");
    const int64_t now = store_.now();
    const auto used = quota_used_of(quota_, QuotaSubject::kAccount, account, acc->effective.quota, now);
    HttpResponse r = json_response(200, account_to_json(*acc, used, now));
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse KeyApi::create_key(const Id &account, const Actor &actor, const HttpRequest &req) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"name", "scopes", "rateLimitPerMinute", "expiresAt", "quota", "allowedIps", "meta"},
                             "name, scopes, rateLimitPerMinute, expiresAt, quota, allowedIps, meta"))
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
    if (body.contains("allowedIps")) spec.allowed_ips = allowed_ips_from_json(body["allowedIps"], "allowedIps");
    if (body.contains("meta")) spec.meta = meta_from_json(body["meta"], "meta");
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

HttpResponse KeyApi::list_keys(const Id &account, const HttpRequest &req) {
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(req, kKeyIdPrefix, limit, after)) return *r;
    KeyPage page = store_.list_keys(account, limit, after);
    const uint32_t entitlement = entitlement_of(account);
    json keys = json::array();
    const std::map<Id, KeyLeak> leaks = store_.key_leaks(account);
    for (const auto &k : page.keys) {
        keys.push_back(key_json(k, entitlement));
        set_leak(keys.back(), leaks, k.key_id);
    }
    std::string usage_error = add_usage(account, page.keys, keys);
    json next = page.next ? json(id_to_string(kKeyIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"keys", keys}, {"nextCursor", next}});
    r.internal_error = std::move(usage_error);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

// One key, with its usage.
HttpResponse KeyApi::one_key(const Id &account, const KeyRecord &key, int status) {
    json obj = key_json(key, entitlement_of(account));
    set_leak(obj, store_.key_leaks(account), key.key_id);
    std::string usage_error = add_usage(account, {key}, obj);
    HttpResponse r = json_response(status, obj);
    r.internal_error = std::move(usage_error);
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse KeyApi::get_key(const Id &account, const std::string &id_text) {
    Id id{};
    // An id that cannot exist and another account's key look the same.
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    auto key = store_.find_key(id);
    if (!key || key->account_id != account) return key_not_found();
    return one_key(account, *key, 200);
}

HttpResponse KeyApi::update_key(const Id &account, const Actor &actor, const std::string &id_text,
                                    const HttpRequest &req) {
    Id id{};
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    HttpResponse refused;
    std::optional<json> parsed = object_body(req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"name", "scopes", "rateLimitPerMinute", "expiresAt", "quota", "allowedIps", "meta"},
                             "any of name, scopes, rateLimitPerMinute, expiresAt, quota, allowedIps, meta"))
        return *r;
    if (body.empty())
        return invalid("body", "Give at least one of name, scopes, rateLimitPerMinute, expiresAt, quota, allowedIps, meta");
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
    // null: any address again
    if (body.contains("allowedIps")) changes.allowed_ips = allowed_ips_from_json(body["allowedIps"], "allowedIps");
    if (body.contains("meta")) changes.meta = meta_from_json(body["meta"], "meta");  // null: none
    return one_key(account, store_.update_key(account, id, changes, actor), 200);
}

HttpResponse KeyApi::revoke_key(const Id &account, const Actor &actor, const std::string &id_text) {
    Id id{};
    if (!parse_id(kKeyIdPrefix, id_text, id)) return key_not_found();
    return one_key(account, store_.revoke_key(account, id, actor), 200);
}

HttpResponse KeyApi::roll_key(const Id &account, const Actor &actor, const std::string &id_text,
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

}  // namespace keyauth
