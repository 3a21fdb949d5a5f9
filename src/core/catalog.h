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

// Renders one catalog; exposed for the unit tests.
std::string render_plan(std::string_view id, const PlanRecordView &plan, uint64_t rate_micro);

}  // namespace keyauth
