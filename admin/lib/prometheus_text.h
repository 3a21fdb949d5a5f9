// What the daemons' /metrics share: Prometheus text exposition (a family's
// HELP and TYPE lines, a sample) and the GET-only answer that carries it.
#pragma once

#include <string>

#include "http_exchange.h"

namespace keyauth {

// "# HELP name help\n# TYPE name type\n"
void metric_family(std::string &out, const char *name, const char *type, const char *help);

// A family of one sample without labels.
void metric(std::string &out, const char *name, const char *type, const char *help,
            const std::string &value);

// 405 with Allow: GET for another method; else 200 with the text (the
// Prometheus content type).
HttpResponse metrics_response(const HttpRequest &request, std::string text);
HttpResponse metrics_method_not_allowed();

}  // namespace keyauth
