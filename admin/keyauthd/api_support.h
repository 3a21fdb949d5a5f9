// What keyauthd's two APIs share (the console's, console_api.h, and the
// admin listener's, admin_api.h): the JSON body of a write and its field
// readers, paging arguments, and the one mapping of the store's errors to
// HTTP answers. Each reader returns the answer that refuses the input,
// naming the field, or nothing.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "http_exchange.h"
#include "ids.h"
#include "key_rules.h"

namespace keyauth {

inline constexpr size_t kDefaultPage = 50;
inline constexpr size_t kMaxPage = 100;

HttpResponse json_response(int status, const nlohmann::json &body);
// 400 VALIDATION_ERROR naming the field.
HttpResponse invalid(const std::string &field, const std::string &message);
HttpResponse method_not_allowed(const char *allow);
// Whether `method` is one of `allow` ("GET, POST").
bool method_allowed(const std::string &method, const char *allow);

// The JSON object body of a write (Content-Type application/json, at most
// 64 KiB, strict: no duplicate field), or the answer that refuses it.
std::optional<nlohmann::json> object_body(const HttpRequest &req, HttpResponse &refused);
std::optional<HttpResponse> only_fields(const nlohmann::json &body, const std::set<std::string> &fields,
                                        const char *expected);
std::optional<HttpResponse> read_name(const nlohmann::json &v, std::string &out);
std::optional<HttpResponse> read_scopes(const nlohmann::json &v, std::vector<std::string> &out);
std::optional<HttpResponse> read_rate(const nlohmann::json &v, uint32_t &out,
                                      const char *field = "rateLimitPerMinute");
// expiresAt: an RFC 3339 time, or null (never) where allow_null.
std::optional<HttpResponse> read_expiry(const nlohmann::json &v, bool allow_null, Expiry &out);

// The query's parameters, each known and given once, or the refusal.
std::optional<HttpResponse> query_args(const HttpRequest &req, const std::set<std::string> &known,
                                       std::map<std::string, std::string> &out);

// ?limit= (1 to kMaxPage, default kDefaultPage) and ?cursor= (an id of
// id_prefix), or the answer that refuses them.
std::optional<HttpResponse> page_args(const HttpRequest &req, std::string_view id_prefix, size_t &limit,
                                      std::optional<Id> &after);

// Runs `answer`, mapping whatever the store throws to its HTTP answer:
// invalid 400, not found 404 (the error's code, or not_found_code), conflict
// 409, forbidden 403, busy and unavailable 503, full 507, anything else 500
// (its detail for the daemon's log only). Never throws.
HttpResponse answer_or_error(const std::function<HttpResponse()> &answer, const char *not_found_code) noexcept;

}  // namespace keyauth
