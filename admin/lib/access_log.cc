#include "access_log.h"

#include <cstdio>
#include <string>

#include "key_json.h"
#include "redact.h"
#include "store.h"

namespace keyauth {

void emit(const nlohmann::ordered_json &line) {
    std::string text =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fputs(text.c_str(), stderr);
}

void log_exchange(const ExchangeLog &x) {
    // The path and method come from the client: any secret pasted into them
    // is masked before they are cut (a secret cut in two would escape the mask).
    std::string path = x.path, method = x.method;
    redact_secrets(path.data(), path.size());
    redact_secrets(method.data(), method.size());
    if (path.size() > 512) path.resize(512);
    if (method.size() > 16) method.resize(16);
    nlohmann::ordered_json line = {{"ts", format_time(wall_clock_ms())},
                                   {"remote", x.remote},
                                   {"method", method},
                                   {"path", path},
                                   {"status", x.status}};
    if (!x.account.empty()) line["account"] = x.account;
    if (!x.internal_error.empty()) {
        std::string error = x.internal_error;
        redact_secrets(error.data(), error.size());
        line["error"] = error;
    }
    emit(line);
}

}  // namespace keyauth
