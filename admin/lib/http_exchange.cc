#include "http_exchange.h"

#include <nlohmann/json.hpp>

namespace keyauth {

HttpResponse json_response(int status, std::string json_text) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(json_text);
    r.body += '\n';
    return r;
}

HttpResponse json_error(int status, const std::string &code, const std::string &message,
                        const std::string &field) {
    nlohmann::json err = {{"code", code}, {"message", message}};
    if (!field.empty()) err["field"] = field;
    return json_response(status, nlohmann::json{{"error", err}}.dump());
}

}  // namespace keyauth
