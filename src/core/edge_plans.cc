// The plan-catalog half of the C API in keyauth_core.h.
#include <cstdio>
#include <cstring>
#include <string>

#include "edge.h"

extern "C" ka_plans_route_e ka_plans_route(ka_str_t base, ka_str_t uri, const ka_str_t *raw,
                                           ka_str_t *id) {
    std::string_view raw_view;
    if (raw != nullptr) raw_view = std::string_view(raw->data, raw->len);
    auto r = keyauth::route_plans(std::string_view(base.data, base.len),
                                  std::string_view(uri.data, uri.len),
                                  raw != nullptr ? &raw_view : nullptr);
    *id = {r.id.data(), r.id.size()};
    using K = keyauth::PlanRoute::Kind;
    switch (r.kind) {
    case K::kCatalog: return KA_PLANS_ROUTE_CATALOG;
    case K::kPlan: return KA_PLANS_ROUTE_PLAN;
    case K::kNotFound: break;
    }
    return KA_PLANS_ROUTE_NOT_FOUND;
}

extern "C" void ka_edge_plans(ka_edge_t *edge, const char *plan_id, size_t plan_id_len,
                              ka_plans_result_t *out) {
    std::memset(out, 0, sizeof *out);
    out->status = KA_PLANS_UNAVAILABLE;
    if (edge == nullptr || !edge->store) {
        snprintf(out->reason, sizeof out->reason, "key store is not open");
        return;
    }
    try {
        std::string why;
        auto r = edge->catalog.get(*edge->store,
                                   plan_id ? std::string_view(plan_id, plan_id_len) : std::string_view(),
                                   plan_id == nullptr, why);
        using S = keyauth::CatalogCache::Status;
        out->status = r.status == S::kOk         ? KA_PLANS_OK
                      : r.status == S::kNotFound ? KA_PLANS_NOT_FOUND
                      : r.status == S::kNoRate   ? KA_PLANS_NO_RATE
                                                 : KA_PLANS_UNAVAILABLE;
        out->body = {r.body.data(), r.body.size()};
        out->etag = {r.etag.data(), r.etag.size()};
        snprintf(out->reason, sizeof out->reason, "%s", why.c_str());
    } catch (...) {
        out->status = KA_PLANS_UNAVAILABLE;
        snprintf(out->reason, sizeof out->reason, "internal error rendering the plan catalog");
    }
}
