#include "api_support.h"

#include <algorithm>
#include <cerrno>
#include <charconv>

#include "lmdb_backend.h"
#include "rfc3339.h"
#include "store_error.h"
#include "strict_json.h"
#include "url.h"
#include "validation.h"

namespace keyauth {

using nlohmann::json;

HttpResponse json_response(int status, const json &body) { return keyauth::json_response(status, body.dump()); }

HttpResponse invalid(const std::string &field, const std::string &message) {
    return json_error(400, "VALIDATION_ERROR", message, field);
}

HttpResponse method_not_allowed(const char *allow) {
    HttpResponse r = json_error(405, "METHOD_NOT_ALLOWED", "Method not allowed here");
    r.headers.emplace_back("Allow", allow);
    return r;
}

namespace {

bool is_json_media_type(const std::string &content_type) {
    std::string type = content_type.substr(0, content_type.find(';'));
    type.erase(std::remove(type.begin(), type.end(), ' '), type.end());
    std::transform(type.begin(), type.end(), type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return type == "application/json";
}

std::optional<size_t> parse_limit(const std::string &text) {
    size_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v < 1 ||
        v > kMaxPage) {
        return std::nullopt;
    }
    return v;
}

// A member name from the body goes into the error only when it is short
// and plain: a name is the client's text, and an error is logged.
bool nameable(const std::string &name) {
    if (name.empty() || name.size() > 64) return false;
    for (unsigned char c : name) {
        if (c < 0x21 || c > 0x7e) return false;
    }
    return true;
}

}  // namespace

bool method_allowed(const std::string &method, const char *allow) {
    return (", " + std::string(allow) + ",").find(", " + method + ",") != std::string::npos;
}

std::optional<json> object_body(const HttpRequest &req, HttpResponse &refused) {
    if (!is_json_media_type(req.content_type)) {
        refused = json_error(415, "UNSUPPORTED_MEDIA_TYPE",
                             "The body must be JSON: Content-Type: application/json");
        return std::nullopt;
    }
    if (req.body.size() > kMaxRequestBody) {
        refused = json_error(413, "PAYLOAD_TOO_LARGE", "The body is larger than 64 KiB");
        return std::nullopt;
    }
    std::string duplicate, broken;
    json body = parse_json_strict(req.body, duplicate, &broken);
    if (nameable(duplicate)) {
        refused = invalid(duplicate, "Field \"" + duplicate + "\" appears more than once");
    } else if (!duplicate.empty()) {
        refused = invalid("body", "A member name appears more than once in one object");
    } else if (body.is_discarded() && nameable(broken)) {
        refused = invalid(broken, "Field \"" + broken + "\" holds a value that is not JSON: bytes that are not "
                                  "UTF-8, or a number out of range");
    } else if (body.is_discarded()) {
        refused = invalid("body", "The body is not valid JSON (or not valid UTF-8)");
    } else if (!body.is_object()) {
        refused = invalid("body", "The body must be a JSON object");
    } else {
        return body;
    }
    return std::nullopt;
}

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

std::optional<HttpResponse> read_rate(const json &v, uint32_t &out, const char *field) {
    if (!v.is_number_integer()) return invalid(field, std::string(field) + " must be an integer");
    if (v.is_number_unsigned() ? v.get<uint64_t>() > kMaxRatePerMinute : v.get<int64_t>() < 1)
        return invalid(field, std::string(field) + " must be an integer from 1 to " + std::to_string(kMaxRatePerMinute));
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

std::optional<HttpResponse> page_args(const HttpRequest &req, std::string_view id_prefix, size_t &limit,
                                      std::optional<Id> &after) {
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

HttpResponse answer_or_error(const std::function<HttpResponse()> &answer, const char *not_found_code) noexcept {
    std::string detail;
    try {
        return answer();
    } catch (const StoreError &e) {
        switch (e.kind()) {
        case StoreError::Kind::kInvalid: return invalid(e.field(), e.what());
        case StoreError::Kind::kNotFound:
            return json_error(404, e.code().empty() ? not_found_code : e.code(), e.what());
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

// The query's parameters, each known and given once, or the refusal.
std::optional<HttpResponse> query_args(const HttpRequest &req, const std::set<std::string> &known,
                                       std::map<std::string, std::string> &out) {
    std::vector<std::pair<std::string, std::string>> pairs;
    if (!query_params(req.query, pairs)) return invalid("query", "The query string cannot be decoded");
    for (auto &[name, value] : pairs) {
        if (!known.count(name)) return invalid(name, "Unknown query parameter \"" + name + "\"");
        if (!out.emplace(name, value).second) return invalid(name, "\"" + name + "\" is given more than once");
    }
    return std::nullopt;
}

}  // namespace keyauth
