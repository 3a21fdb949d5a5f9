// The plan catalog (import, list, find) and the exchange rate.
#include <algorithm>
#include <set>

#include "keyauth_schema.h"
#include "le.h"
#include "money.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

std::string rate_text(uint64_t micro) {
    char buf[kRateTextMax];
    return std::string(buf, format_rate(micro, buf));
}

std::string le_bytes(uint64_t n) {
    unsigned char buf[8];
    store_le<uint64_t>(buf, n);
    return std::string(reinterpret_cast<const char *>(buf), sizeof buf);
}

}  // namespace

// catalog_version is the plans table's guard: every write of plans bumps it,
// so an import computed from an older catalog never applies over a newer one.
void Store::import_plans(const std::vector<PlanRecord> &plans, const Actor &actor) {
    validate_catalog(plans);
    write([&](RecordReader &r, Mutation &m) {
        auto version = r.get(Table::kMeta, KA_META_CATALOG_VERSION);
        m.expect(Table::kMeta, KA_META_CATALOG_VERSION, version);
        std::set<std::string_view> kept;
        for (const auto &p : plans) kept.insert(p.id);
        size_t removed = 0;
        r.scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view) {
            if (kept.count(id) == 0) {
                m.erase(Table::kPlans, id);
                removed++;
            }
            return true;
        });
        for (const auto &p : plans) m.put(Table::kPlans, p.id, encode_plan_record(p));
        uint64_t n = version && version->size() == 8
                         ? load_le<uint64_t>(reinterpret_cast<const unsigned char *>(version->data()))
                         : 0;
        m.put(Table::kMeta, KA_META_CATALOG_VERSION, le_bytes(n + 1));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, clock_(), Id{}, "plans.import", "plans", "");
        e.change("catalogVersion", n, n + 1);
        e.change("plans", nullptr, plans.size());
        if (removed) e.change("removed", nullptr, removed);
        put_audit(r, m, events);
        return true;
    });
}

std::vector<PlanRecord> Store::list_plans() {
    std::vector<PlanRecord> out;
    backend_->read()->scan(Table::kPlans, "", "", [&](std::string_view id, std::string_view v) {
        out.push_back(plan_from(id, v));
        return true;
    });
    std::sort(out.begin(), out.end(),
              [](const PlanRecord &a, const PlanRecord &b) { return a.sort_order < b.sort_order; });
    return out;
}

std::optional<PlanRecord> Store::find_plan(std::string_view id) {
    if (id.empty() || id.size() > KA_PLAN_ID_MAX_LEN) return std::nullopt;
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kPlans, id);
    if (!v) return std::nullopt;
    return plan_from(id, *v);
}

FxRecord Store::set_exchange_rate(uint64_t inr_per_usd_micro, const Actor &actor) {
    if (inr_per_usd_micro == 0 || inr_per_usd_micro > kMaxRateMicro)
        invalid("rate", "the rate must be a positive decimal of at most 1000000 INR per USD");
    return write([&](RecordReader &r, Mutation &m) {
        FxRecord rec{inr_per_usd_micro, clock_()};
        std::optional<std::string> before;
        if (auto old = r.get(Table::kMeta, KA_META_FX_USD_INR)) {
            FxRecord was;
            if (decode_fx_record(old->data(), old->size(), was) == DecodeStatus::kOk)
                before = rate_text(was.inr_per_usd_micro);
        }
        m.put(Table::kMeta, KA_META_FX_USD_INR, encode_fx_record(rec));  // the newest rate wins
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, rec.set_ms, Id{}, "fx.set", "fx", "");
        e.change("exchangeRate", before ? nlohmann::json(*before) : nlohmann::json(nullptr),
                 rate_text(inr_per_usd_micro));
        put_audit(r, m, events);
        return rec;
    });
}

std::optional<FxRecord> Store::exchange_rate() {
    auto r = backend_->read();  // what get returns lives as long as the reader
    auto v = r->get(Table::kMeta, KA_META_FX_USD_INR);
    if (!v) return std::nullopt;
    FxRecord rec;
    if (decode_fx_record(v->data(), v->size(), rec) != DecodeStatus::kOk)
        corrupt("the exchange rate record is unreadable");
    return rec;
}

}  // namespace keyauth
