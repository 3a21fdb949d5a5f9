#include "console_metrics.h"

#include <cstdio>

#include "prometheus_text.h"
#include "store.h"

namespace keyauth {
namespace {

std::string_view method_label(std::string_view m) noexcept {
    for (std::string_view known : {"GET", "HEAD", "POST", "PATCH", "PUT", "DELETE", "OPTIONS"}) {
        if (m == known) return known;
    }
    return "other";
}

// %g: bounds as written ("0.0025", "10"); sums to the microsecond and more
std::string number(double v, int digits = 6) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
}

}  // namespace

std::string_view metrics_route(std::string_view path) noexcept {
    if (path == "/v1/keys" || path == "/v1/audit" || path == "/v1/account" || path == "/metrics" ||
        path == "/v1/secret-scanning/github")
        return path;
    constexpr std::string_view keys = "/v1/keys/";
    if (path.substr(0, keys.size()) != keys) return "other";
    std::string_view rest = path.substr(keys.size());
    const size_t slash = rest.find('/');
    std::string_view id = rest.substr(0, slash);
    std::string_view tail = slash == std::string_view::npos ? "" : rest.substr(slash);
    if (id.empty()) return "other";
    if (tail.empty()) return "/v1/keys/{id}";
    if (tail == "/revoke") return "/v1/keys/{id}/revoke";
    if (tail == "/roll") return "/v1/keys/{id}/roll";
    return "other";
}

void Histogram::observe(double seconds) noexcept {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) i++;
    if (i < kBounds.size()) buckets_[i]++;
    count_++;
    sum_ += seconds;
}

void Histogram::render(std::string &out, const std::string &name, const std::string &labels) const {
    const std::string sep = labels.empty() ? "" : ",";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); i++) {
        cumulative += buckets_[i];
        out += name + "_bucket{" + labels + sep + "le=\"" + number(kBounds[i]) + "\"} " +
               std::to_string(cumulative) + "\n";
    }
    out += name + "_bucket{" + labels + sep + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    out += name + "_sum" + braces + " " + number(sum_, 12) + "\n";
    out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

void ConsoleMetrics::observe_request(std::string_view method, std::string_view path, int status,
                                     double seconds) {
    const std::string route(metrics_route(path));
    std::lock_guard<std::mutex> lock(mu_);
    requests_[{route, std::string(method_label(method)), status}]++;
    latency_[route].observe(seconds);
}

void ConsoleMetrics::observe_admin_request(std::string_view method, std::string_view route, int status,
                                           double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    admin_requests_[{std::string(route), std::string(method_label(method)), status}]++;
    latency_[std::string(route)].observe(seconds);
}

void ConsoleMetrics::observe_write(double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    writes_.observe(seconds);
}

std::string ConsoleMetrics::render(const StoreGauges &store) const {
    std::string out;
    std::lock_guard<std::mutex> lock(mu_);
    metric_family(out, "keyauthd_requests_total", "counter",
         "Requests answered, by route template, method and status.");
    for (const auto &[k, n] : requests_) {
        const auto &[route, method, status] = k;
        out += "keyauthd_requests_total{route=\"" + route + "\",method=\"" + method + "\",status=\"" +
               std::to_string(status) + "\"} " + std::to_string(n) + "\n";
    }
    metric_family(out, "keyauthd_admin_requests_total", "counter",
         "Calls of the admin API (--admin-listen), by route template, method and status.");
    for (const auto &[k, n] : admin_requests_) {
        const auto &[route, method, status] = k;
        out += "keyauthd_admin_requests_total{route=\"" + route + "\",method=\"" + method + "\",status=\"" +
               std::to_string(status) + "\"} " + std::to_string(n) + "\n";
    }
    metric_family(out, "keyauthd_request_duration_seconds", "histogram",
         "From the end of a request's head to its answer, by route template.");
    for (const auto &[route, h] : latency_) {
        h.render(out, "keyauthd_request_duration_seconds", "route=\"" + route + "\"");
    }
    metric_family(out, "keyauthd_store_write_seconds", "histogram",
         "Store writes (one transaction each, the durable commit included).");
    writes_.render(out, "keyauthd_store_write_seconds", "");
    auto gauge = [&out](const char *name, const char *text, const std::optional<uint64_t> &v) {
        if (v) metric(out, name, "gauge", text, std::to_string(*v));
    };
    gauge("keyauthd_store_map_bytes", "The LMDB map's size.", store.map_bytes);
    gauge("keyauthd_store_used_bytes", "LMDB pages in use, in bytes.", store.used_bytes);
    gauge("keyauthd_store_keys", "Key records, revoked and expired ones included.", store.keys);
    gauge("keyauthd_store_accounts", "Account records.", store.accounts);
    return out;
}

HttpResponse ConsoleMetrics::handle(const HttpRequest &request, Store &store) const noexcept {
    try {
        if (request.method != "GET") return metrics_method_not_allowed();
        return metrics_response(request, render(store.gauges()) + (more_ ? more_() : std::string()));
    } catch (const std::exception &e) {
        HttpResponse r = json_error(500, "INTERNAL_ERROR", "the metrics could not be read");
        r.internal_error = e.what();
        return r;
    } catch (...) {
        HttpResponse r;
        r.status = 500;
        return r;
    }
}

}  // namespace keyauth
