#include "catalog.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "keyauth_schema.h"
#include "le.h"
#include "money.h"
#include "records.h"

namespace keyauth {
namespace {

// JSON string literal, escaped (names and features are operator text).
std::string quoted(std::string_view s) {
    return nlohmann::json(std::string(s)).dump();
}

// Exact INR amount as a JSON number: 4999 or 4999.50.
std::string inr_number(uint64_t paise) {
    if (paise % kPaisePerInr == 0) return std::to_string(paise / kPaisePerInr);
    char buf[kMoneyTextMax];
    return std::string(buf, format_paise(paise, buf));
}

}  // namespace

PlanRoute route_plans(std::string_view base, std::string_view uri, const std::string_view *raw) {
    using K = PlanRoute::Kind;
    if (raw != nullptr && *raw != uri) return {K::kNotFound, {}};
    if (!base.empty() && base.back() == '/') base.remove_suffix(1);
    if (uri.size() < base.size() || uri.compare(0, base.size(), base) != 0) return {K::kNotFound, {}};
    std::string_view rest = uri.substr(base.size());
    if (rest.empty() || rest == "/") return {K::kCatalog, {}};
    if (rest.front() != '/') return {K::kNotFound, {}};  // base + "plus-5k"
    std::string_view id = rest.substr(1);
    if (id.find('/') != std::string_view::npos) return {K::kNotFound, {}};
    return {K::kPlan, id};
}

std::string render_plan(std::string_view id, const PlanRecordView &plan, uint64_t rate_micro) {
    char usd[kMoneyTextMax], rate[kRateTextMax];
    size_t usd_len = format_cents(usd_cents(plan.price_paise, rate_micro), usd);
    size_t rate_len = format_rate(rate_micro, rate);
    std::string out = "{\"id\":" + quoted(id) + ",\"name\":" + quoted(plan.name) +
                      ",\"priceInr\":" + inr_number(plan.price_paise) + ",\"priceUsd\":\"" +
                      std::string(usd, usd_len) + "\",\"exchangeRate\":\"" +
                      std::string(rate, rate_len) + "\",\"features\":[";
    bool first = true;
    for (auto f : plan.feature_list()) {
        out += (first ? "" : ",") + quoted(f);
        first = false;
    }
    out += "],\"popular\":";
    out += plan.popular ? "true" : "false";
    out += ",\"sortOrder\":" + std::to_string(plan.sort_order) + "}";
    return out;
}

int CatalogCache::refresh(EdgeStore::Snapshot &snap, EdgeStore &store, uint64_t version,
                          uint64_t rate, std::string &why) {
    struct Entry {
        std::string id;
        int32_t order;
        std::string json;
    };
    std::vector<Entry> entries;
    bool broken = false;
    int rc = snap.scan(store.plans(), [&](std::string_view id, std::string_view value) {
        PlanRecordView plan;
        if (decode_plan_record(value.data(), value.size(), plan) != DecodeStatus::kOk) {
            why = "plan \"" + std::string(id) + "\" has an unreadable record (layout version " +
                  std::to_string(plan.version) + ")";
            broken = true;
            return false;
        }
        entries.push_back(Entry{std::string(id), plan.sort_order, render_plan(id, plan, rate)});
        return true;
    });
    if (rc != 0) {
        why = std::string("LMDB scan of plans: ") + mdb_strerror(rc);
        return rc;
    }
    if (broken) return -1;
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry &a, const Entry &b) { return a.order < b.order; });
    all_ = "{\"plans\":[";
    index_.clear();
    for (size_t i = 0; i < entries.size(); i++) {
        if (i) all_ += ",";
        size_t begin = all_.size();
        all_ += entries[i].json;
        index_.emplace_back(entries[i].id, std::make_pair(begin, all_.size()));
    }
    all_ += "]}\n";
    std::sort(index_.begin(), index_.end());
    etag_ = "\"c" + std::to_string(version) + "-r" + std::to_string(rate) + "\"";
    version_ = version;
    rate_micro_ = rate;
    valid_ = true;
    return 0;
}

CatalogCache::Result CatalogCache::get(EdgeStore &store, std::string_view plan_id, bool whole,
                                       std::string &why) {
    EdgeStore::Snapshot snap(store);
    int rc = snap.begin();
    if (rc != 0) {
        why = std::string("LMDB read transaction: ") + mdb_strerror(rc);
        return {Status::kUnavailable, {}, {}};
    }
    std::string_view raw;
    std::string_view fx_key = KA_META_FX_USD_INR;
    rc = snap.get(store.meta(), fx_key.data(), fx_key.size(), raw);
    if (rc == MDB_NOTFOUND) return {Status::kNoRate, {}, {}};
    FxRecord fx;
    if (rc != 0 || decode_fx_record(raw.data(), raw.size(), fx) != DecodeStatus::kOk) {
        why = rc != 0 ? std::string("LMDB get of the exchange rate: ") + mdb_strerror(rc)
                      : "the exchange rate record is unreadable";
        return {Status::kUnavailable, {}, {}};
    }
    std::string_view version_key = KA_META_CATALOG_VERSION;
    uint64_t version = 0;
    rc = snap.get(store.meta(), version_key.data(), version_key.size(), raw);
    if (rc == 0 && raw.size() == sizeof(uint64_t)) {
        version = load_le<uint64_t>(reinterpret_cast<const unsigned char *>(raw.data()));
    } else if (rc != 0 && rc != MDB_NOTFOUND) {
        why = std::string("LMDB get of the catalog version: ") + mdb_strerror(rc);
        return {Status::kUnavailable, {}, {}};
    }
    if (!valid_ || version != version_ || fx.inr_per_usd_micro != rate_micro_) {
        valid_ = false;
        if (refresh(snap, store, version, fx.inr_per_usd_micro, why) != 0) {
            return {Status::kUnavailable, {}, {}};
        }
    }
    if (whole) return {Status::kOk, all_, etag_};
    auto it = std::lower_bound(index_.begin(), index_.end(), plan_id,
                               [](const auto &e, std::string_view id) { return e.first < id; });
    if (it == index_.end() || it->first != plan_id) return {Status::kNotFound, {}, {}};
    return {Status::kOk, std::string_view(all_).substr(it->second.first,
                                                       it->second.second - it->second.first),
            etag_};
}

}  // namespace keyauth
