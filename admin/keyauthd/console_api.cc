#include "console_api.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>

#include "auth_header.h"
#include "key_json.h"
#include "strict_json.h"

namespace keyauth {
namespace {

using nlohmann::json;

const std::string kKeysPath = "/v1/keys";
const std::string kRevokeSuffix = "/revoke";

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

// Console tokens travel as Bearer credentials too.
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
    std::optional<Id> account;
    if (parsed == BearerParse::kFound) account = store.account_for_console_token(token);
    if (!account) {
        denied = json_error(401, "INVALID_CONSOLE_TOKEN", "The console token is invalid");
        denied.headers.emplace_back("WWW-Authenticate",
                                    "Bearer realm=\"console\", error=\"invalid_token\"");
    }
    return account;
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
        case StoreError::Kind::kNotFound: return json_error(404, "NOT_FOUND", e.what());
        case StoreError::Kind::kConflict: return json_error(409, "CONFLICT", e.what());
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
    } catch (const lmdb::map_full_error &) {
        return json_error(507, "STORE_FULL",
                             "The key store is full; the operator must grow its map size");
    } catch (const lmdb::error &e) {
        if (e.code() == MDB_MAP_RESIZED) {
            // another writer grew the map past this daemon's
            HttpResponse r = json_error(
                503, "STORE_UNAVAILABLE",
                "The key store grew beyond this daemon's map; the operator must restart keyauthd");
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

HttpResponse ConsoleApi::route(const HttpRequest &req) {
    const bool is_collection = req.path == kKeysPath;
    const bool is_revoke = req.path.size() > kKeysPath.size() + 1 + kRevokeSuffix.size() &&
                           req.path.compare(0, kKeysPath.size() + 1, kKeysPath + "/") == 0 &&
                           req.path.compare(req.path.size() - kRevokeSuffix.size(),
                                            kRevokeSuffix.size(), kRevokeSuffix) == 0;
    if (!is_collection && !is_revoke) {
        return json_error(404, "NOT_FOUND", "No such endpoint");
    }
    if (is_collection && req.method != "GET" && req.method != "POST") {
        return method_not_allowed("GET, POST");
    }
    if (is_revoke && req.method != "POST") {
        return method_not_allowed("POST");
    }

    HttpResponse denied;
    std::optional<Id> account = authenticate(store_, req, denied);
    if (!account) return denied;

    HttpResponse res;
    if (is_revoke) {
        std::string id = req.path.substr(kKeysPath.size() + 1, req.path.size() - kKeysPath.size() -
                                                                   1 - kRevokeSuffix.size());
        res = revoke_key(*account, id);
    } else if (req.method == "POST") {
        res = create_key(*account, req);
    } else {
        res = list_keys(*account, req);
    }
    res.account = id_to_string(kAccountIdPrefix, *account);
    return res;
}

HttpResponse ConsoleApi::create_key(const Id &account, const HttpRequest &req) {
    if (!is_json_media_type(req.content_type)) {
        return json_error(415, "UNSUPPORTED_MEDIA_TYPE",
                             "The body must be JSON: Content-Type: application/json");
    }
    if (req.body.size() > kMaxBody) {
        return json_error(413, "PAYLOAD_TOO_LARGE", "The body is larger than 64 KiB");
    }
    std::string duplicate;
    json body = parse_json_strict(req.body, duplicate);
    if (!duplicate.empty()) {
        return invalid(duplicate, "Field \"" + duplicate + "\" appears more than once");
    }
    if (body.is_discarded()) {
        return invalid("body", "The body is not valid JSON (or not valid UTF-8)");
    }
    if (!body.is_object()) {
        return invalid("body", "The body must be a JSON object");
    }
    static const std::set<std::string> kFields = {"name", "scopes", "rateLimitPerMinute"};
    for (auto it = body.begin(); it != body.end(); ++it) {
        if (!kFields.count(it.key())) {
            return invalid(it.key(), "Unknown field \"" + it.key() +
                                         "\"; expected name, scopes, rateLimitPerMinute");
        }
    }
    for (const auto &f : kFields) {
        if (!body.contains(f)) return invalid(f, "Missing field \"" + f + "\"");
    }
    const json &name = body["name"];
    const json &scopes = body["scopes"];
    const json &rate = body["rateLimitPerMinute"];
    if (!name.is_string()) return invalid("name", "name must be a string");
    if (!scopes.is_array()) return invalid("scopes", "scopes must be an array of strings");
    if (scopes.size() > KA_SCOPES_MAX) {
        return invalid("scopes", "at most " + std::to_string(KA_SCOPES_MAX) + " scopes");
    }
    std::vector<std::string> scope_list;
    for (const auto &s : scopes) {
        if (!s.is_string()) return invalid("scopes", "scopes must be an array of strings");
        scope_list.push_back(s.get<std::string>());
    }
    if (!rate.is_number_integer()) {
        return invalid("rateLimitPerMinute", "rateLimitPerMinute must be an integer");
    }
    if (rate.is_number_unsigned() ? rate.get<uint64_t>() > kMaxRatePerMinute
                                  : rate.get<int64_t>() < 1) {
        return invalid("rateLimitPerMinute", "rateLimitPerMinute must be an integer from 1 to " +
                                                 std::to_string(kMaxRatePerMinute));
    }
    // Read before the write: once the key is committed, nothing may fail
    // between it and the one answer that carries its secret.
    auto acc = store_.find_account(account);
    CreatedKey made = store_.create_key(account, name.get<std::string>(), scope_list,
                                        static_cast<uint32_t>(rate.get<int64_t>()));
    json out = key_to_json(made.key, acc ? acc->record.entitlement_rpm : 0);
    out["secret"] = made.secret;
    HttpResponse r = json_response(201, out);
    r.headers.emplace_back("Cache-Control", "no-store");  // the one and only copy of the secret
    return r;
}

HttpResponse ConsoleApi::list_keys(const Id &account, const HttpRequest &req) {
    size_t limit = kDefaultPage;
    if (req.has_limit) {
        auto parsed = parse_limit(req.query_limit);
        if (!parsed) {
            return invalid("limit", "limit must be an integer from 1 to " + std::to_string(kMaxPage));
        }
        limit = *parsed;
    }
    std::optional<Id> after;
    if (req.has_cursor) {
        Id id{};
        if (!parse_id(kKeyIdPrefix, req.query_cursor, id)) {
            return invalid("cursor", "cursor must be a nextCursor value from an earlier page");
        }
        after = id;
    }
    KeyPage page = store_.list_keys(account, limit, after);
    auto acc = store_.find_account(account);
    uint32_t entitlement = acc ? acc->record.entitlement_rpm : 0;
    json keys = json::array();
    for (const auto &k : page.keys) keys.push_back(key_to_json(k, entitlement));
    json next = page.next ? json(id_to_string(kKeyIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"keys", keys}, {"nextCursor", next}});
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

HttpResponse ConsoleApi::revoke_key(const Id &account, const std::string &id_text) {
    Id id{};
    // An id that cannot exist and another account's key look the same.
    auto not_found = [] { return json_error(404, "KEY_NOT_FOUND", "No such key"); };
    if (!parse_id(kKeyIdPrefix, id_text, id)) return not_found();
    try {
        auto acc = store_.find_account(account);
        KeyRecord rec = store_.revoke_key(account, id);
        return json_response(200, key_to_json(rec, acc ? acc->record.entitlement_rpm : 0));
    } catch (const StoreError &e) {
        if (e.kind() == StoreError::Kind::kNotFound) return not_found();
        throw;
    }
}

}  // namespace keyauth
