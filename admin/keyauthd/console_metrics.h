// keyauthd's GET /metrics (Prometheus text): requests by route, method and
// status, their latency, how long store writes take, and the store's size
// and record counts. Routes are the API's own templates ("/v1/keys/{id}"),
// never a client's path, so the series stay few whatever clients send.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "http_exchange.h"
#include "store_backend.h"

namespace keyauth {

class Store;

// The route template of a path, or "other".
std::string_view metrics_route(std::string_view path) noexcept;

class Histogram {
public:
    static constexpr std::array<double, 13> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                       0.25,  0.5,    1,     2.5,  5,    10};
    void observe(double seconds) noexcept;
    // name_bucket{labels,le=...}, name_sum{labels}, name_count{labels}
    void render(std::string &out, const std::string &name, const std::string &labels) const;

private:
    std::array<uint64_t, kBounds.size()> buckets_{};  // not cumulative
    uint64_t count_ = 0;
    double sum_ = 0;
};

class ConsoleMetrics {
public:
    void observe_request(std::string_view method, std::string_view path, int status, double seconds);
    // A call of the admin listener, by its route template (admin_api.h).
    void observe_admin_request(std::string_view method, std::string_view route, int status, double seconds);
    void observe_write(double seconds);
    std::string render(const StoreGauges &store) const;
    // GET /metrics (405 for another method); never throws.
    HttpResponse handle(const HttpRequest &request, Store &store) const noexcept;
    // More families after the store's (the webhook sender's); set before serving.
    void set_more(std::function<std::string()> more) { more_ = std::move(more); }

private:
    mutable std::mutex mu_;
    std::map<std::tuple<std::string, std::string, int>, uint64_t> requests_;  // route, method, status
    std::map<std::tuple<std::string, std::string, int>, uint64_t> admin_requests_;
    std::map<std::string, Histogram> latency_;                                // by route
    Histogram writes_;
    std::function<std::string()> more_;
};

}  // namespace keyauth
