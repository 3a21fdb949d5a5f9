// The public plan catalog as served at the edge. Rendering happens once per
// (catalog version, exchange rate) per worker; every request then costs a
// read transaction, two lookups in "meta" to check the cache is current, and
// serving the cached bytes. USD prices come from money.h (exact integers).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "edge_store.h"
#include "records.h"

namespace keyauth {

class CatalogCache {
public:
    enum class Status { kOk, kNotFound, kNoRate, kUnavailable };

    struct Result {
        Status status;
        std::string_view body;  // valid until the next call
        std::string_view etag;  // quoted, for ETag / If-None-Match
    };

    // plan_id empty: the whole catalog {"plans":[...]}; else that one plan.
    // On kUnavailable, why says what failed (for the error log).
    Result get(EdgeStore &store, std::string_view plan_id, bool whole, std::string &why);

private:
    int refresh(EdgeStore::Snapshot &snap, EdgeStore &store, uint64_t version, uint64_t rate,
                std::string &why);

    bool valid_ = false;
    uint64_t version_ = 0;
    uint64_t rate_micro_ = 0;
    std::string all_;
    std::string etag_;
    // plan id -> [begin, end) of its object inside all_, sorted by id
    std::vector<std::pair<std::string, std::pair<size_t, size_t>>> index_;
};

// Where a request under a keyauth_plans location goes. Matching is exact on
// nginx's normalized URI (uri: $uri, percent-decoded, "." and ".." resolved,
// slashes merged unless merge_slashes is off), relative to base, the
// location's prefix ("/api/plans"; one trailing '/' is ignored):
//   base, base + "/"          the whole catalog
//   base + "/" + ID           the plan ID (one non-empty segment, exactly)
//   anything else             not found (base + "plus-5k", deeper paths,
//                             empty segments, a trailing '/' after an id)
// raw is the path as the client sent it (the request target before '?'),
// or null when the configuration made the URI (rewrite, internal redirect,
// subrequest). A raw path that differs from uri was not spelled in normal
// form (percent-encoding, dot segments, doubled slashes, a '#'): not found,
// so that a 200 for BASE/ID always means the client wrote that very ID.
struct PlanRoute {
    enum class Kind { kCatalog, kPlan, kNotFound };
    Kind kind;
    std::string_view id;  // kPlan: a view into uri
};
PlanRoute route_plans(std::string_view base, std::string_view uri, const std::string_view *raw);

// Renders one catalog; exposed for the unit tests.
std::string render_plan(std::string_view id, const PlanRecordView &plan, uint64_t rate_micro);

}  // namespace keyauth
