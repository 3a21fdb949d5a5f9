// The plan catalog (import, list, find, the retirement of a plan its
// accounts are on) and the exchange rate.
#include <algorithm>
#include <cstring>
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

// A refusal names at most this many accounts of a plan, then how many more.
constexpr size_t kAccountsNamed = 5;

// Each retirement moves accounts off a plan the import drops, onto one it keeps.
void validate_retirements(const std::vector<PlanRecord> &plans, const PlanRetirements &retire) {
    auto in_catalog = [&](const std::string &id) {
        return std::any_of(plans.begin(), plans.end(), [&](const PlanRecord &p) { return p.id == id; });
    };
    for (const auto &[from, to] : retire) {
        if (in_catalog(from))
            invalid("retire", "plan \"" + from.substr(0, 64) + "\" is in the imported catalog: it is not retired");
        if (!in_catalog(to))
            invalid("retire", "plan \"" + to.substr(0, 64) + "\", which the accounts of \"" + from.substr(0, 64) +
                                  "\" would move to, is not in the imported catalog");
    }
}

// kConflict PLAN_IN_USE naming each plan left with accounts and (some of) them.
[[noreturn]] void plans_in_use(const std::map<std::string, std::vector<Id>> &stuck) {
    std::string msg;
    for (const auto &[plan, accounts] : stuck) {
        msg += (msg.empty() ? "" : "; ") + std::string("plan \"") + plan + "\" is in use by " +
               std::to_string(accounts.size()) + (accounts.size() == 1 ? " account (" : " accounts (");
        for (size_t i = 0; i < accounts.size() && i < kAccountsNamed; i++)
            msg += (i ? ", " : "") + id_to_string(kAccountIdPrefix, accounts[i]);
        if (accounts.size() > kAccountsNamed) msg += " and " + std::to_string(accounts.size() - kAccountsNamed) + " more";
        msg += ")";
    }
    throw StoreError(StoreError::Kind::kConflict, "",
                     msg + ": keep it in the catalog, or name the plan its accounts move to "
                           "(keyauthctl plans import FILE --retire OLD=NEW); nothing was imported",
                     "PLAN_IN_USE");
}

// Every account on a plan that `kept` lacks (the import drops it, or an
// earlier one did) moves to its retirement's plan in this write, one
// account.set_plan event each, what it used in its quota's period kept (the
// ledger counts by account, not by plan); without a retirement the import is
// refused. The accounts table is guarded whole: an account put on a dropped
// plan meanwhile (etcd: another writer) makes the import read again.
void move_accounts_off_dropped_plans(RecordReader &r, Mutation &m, const std::set<std::string_view> &kept,
                                     const PlanRetirements &retire, const Actor &actor, int64_t now,
                                     std::vector<AuditEvent> &events, CatalogImport &out) {
    std::map<std::string, std::vector<Id>> stuck;
    r.scan(Table::kAccounts, "", "", [&](std::string_view key, std::string_view stored) {
        Id id{};
        if (key.size() != id.size()) corrupt("account id of unexpected length");
        std::memcpy(id.data(), key.data(), id.size());
        Account acc = account_from(id, stored);
        const std::string from = acc.record.plan_id;
        if (from.empty() || kept.count(from)) return true;
        auto to = retire.find(from);
        if (to == retire.end()) {
            stuck[from].push_back(id);
            return true;
        }
        acc.record.plan_id = to->second;
        m.expect(Table::kAccounts, key, stored);
        m.put(Table::kAccounts, key, encode_account_record(acc.record));
        audit(events, actor, now, id, "account.set_plan", "account", id_to_string(kAccountIdPrefix, id))
            .change("planId", from, to->second);
        out.moved[from]++;
        return true;
    });
    m.expect_unchanged(Table::kAccounts);
    if (!stuck.empty()) plans_in_use(stuck);
}

}  // namespace

// catalog_version is the plans table's guard: every write of plans bumps it,
// so an import computed from an older catalog never applies over a newer one.
CatalogImport Store::import_plans(const std::vector<PlanRecord> &plans, const Actor &actor,
                                  const PlanRetirements &retire) {
    validate_catalog(plans);
    validate_retirements(plans, retire);
    return write([&](RecordReader &r, Mutation &m) {
        const int64_t now = clock_();
        CatalogImport out;
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
        move_accounts_off_dropped_plans(r, m, kept, retire, actor, now, events, out);
        AuditEvent &e = audit(events, actor, now, Id{}, "plans.import", "plans", "");
        e.change("catalogVersion", n, n + 1);
        e.change("plans", nullptr, plans.size());
        if (removed) e.change("removed", nullptr, removed);
        if (!out.moved.empty()) {
            nlohmann::json retired = nlohmann::json::object();
            size_t accounts = 0;
            for (const auto &[from, count] : out.moved) {
                retired[from] = retire.at(from);
                accounts += count;
            }
            e.change("retired", nullptr, retired);
            e.change("movedAccounts", nullptr, accounts);
        }
        put_audit(r, m, events);
        out.plans = plans.size();
        out.removed = removed;
        return out;
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
