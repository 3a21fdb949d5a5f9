// keyauthd's log: one JSON line per event on stderr, built and escaped by
// the JSON library, with any secret a client pasted into a path or method
// masked. Never a body, a header value or a query string.
#pragma once

#include <nlohmann/json.hpp>

#include "console_server.h"

namespace keyauthd {

void emit(const nlohmann::ordered_json &line);

// One line per request.
void log_exchange(const keyauth::ExchangeLog &x);

}  // namespace keyauthd
