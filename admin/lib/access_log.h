// A daemon's log (keyauthd, keyauth-syncd): one JSON line per event on stderr, built and escaped by
// the JSON library, with any secret a client pasted into a path or method
// masked. Never a body, a header value or a query string.
#pragma once

#include <nlohmann/json.hpp>

#include "http_server.h"

namespace keyauth {

void emit(const nlohmann::ordered_json &line);

// One line per request.
void log_exchange(const ExchangeLog &x);

}  // namespace keyauth
