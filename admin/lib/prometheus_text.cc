#include "prometheus_text.h"

namespace keyauth {

void metric_family(std::string &out, const char *name, const char *type, const char *help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

void metric(std::string &out, const char *name, const char *type, const char *help,
            const std::string &value) {
    metric_family(out, name, type, help);
    out += name;
    out += ' ';
    out += value;
    out += '\n';
}

HttpResponse metrics_method_not_allowed() {
    HttpResponse r = json_error(405, "METHOD_NOT_ALLOWED", "only GET is allowed here");
    r.headers.emplace_back("Allow", "GET");
    return r;
}

HttpResponse metrics_response(const HttpRequest &request, std::string text) {
    if (request.method != "GET") return metrics_method_not_allowed();
    HttpResponse r;
    r.status = 200;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = std::move(text);
    return r;
}

}  // namespace keyauth
