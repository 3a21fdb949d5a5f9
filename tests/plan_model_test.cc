// A model-based test of plans and accounts' quotas (issue 44): random
// sequences of catalog imports (plans dropped, changed and added, with and
// without retirements, some of them wrong), set-plan and account quota
// changes (its own, none, and "follow the plan"), against the real Store on
// both backends, each step checked against a small reference model written
// here: the answer (or the refusal's code), every account's plan and
// effective quota in the store and at the edge (the quota the edge counts
// against), each account's audit trail, and the invariant itself: no
// account is ever on a plan the catalog lacks, so no write turns a quota
// into "unlimited" by the way.
//
// Seeded: KEYAUTH_PLAN_MODEL_SEED=N replays one sequence (its steps printed
// with KEYAUTH_PLAN_MODEL_VERBOSE=1); KEYAUTH_PLAN_MODEL_SEQUENCES sets how
// many run.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model_runner.h"
#include "model_store.h"
#include "quota_period.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::ModelStore;

namespace {

constexpr int kPlans = 5;     // candidate plan ids p0..p4
constexpr int kAccounts = 3;

// ---- the reference model ---------------------------------------------------

struct MPlan {
    bool states_quota = false;
    Quota quota;  // when stated: none is "unlimited"
};

struct MAccount {
    Id id{};
    std::string secret;   // of one key, to ask the edge
    std::string plan;     // "" none
    bool own_quota = false;  // its quota override bit
    Quota quota;          // its own value
    size_t audit_events = 0;
};

std::string plan_id(int i) { return "p" + std::to_string(i); }

std::string quota_text(const Quota &q) {
    return q.none() ? "none" : std::to_string(q.units) + "/" + quota_period_name(q.period);
}

class Harness {
public:
    Harness(Backend kind, uint64_t seed) : rng_(seed), world_(kind, "plans-" + std::to_string(seed)) {
        Store &s = world_.store();
        std::set<int> all;
        for (int i = 0; i < kPlans; i++) all.insert(i);
        apply_import(all, {});
        for (int i = 0; i < kAccounts; i++) {
            MAccount a;
            AccountChanges c;
            if (i < 2) c.plan_id = a.plan = plan_id(i);
            if (i == 1) {
                c.quota = a.quota = Quota{KA_QUOTA_DAY, 7};
                a.own_quota = true;
            }
            CreatedAccount made = s.create_account("a" + std::to_string(i), 600, c);
            a.id = made.account.id;
            a.secret = s.create_key(a.id, "k", {"ip:read"}, 60).secret;
            a.audit_events = 2;  // its creation, its key's
            accounts_.push_back(a);
        }
    }

    bool run(int steps) {
        for (step_ = 0; step_ < steps && failure_.empty(); step_++) {
            const size_t what = rng_() % 100;
            if (what < 35) import_step();
            else if (what < 60) set_plan_step();
            else quota_step();
            if (failure_.empty()) check_all();
        }
        return failure_.empty();
    }
    const std::string &failure() const { return failure_; }
    const std::string &log() const { return log_; }

private:
    void note(const std::string &s) { log_ += "  step " + std::to_string(step_) + ": " + s + "\n"; }
    void fail(const std::string &s) {
        if (failure_.empty()) failure_ = "step " + std::to_string(step_) + ": " + s;
    }
    bool chance(int percent) { return int(rng_() % 100) < percent; }

    MPlan random_plan() {
        MPlan p;
        const int kind = int(rng_() % 100);
        if (kind < 70) {
            p.states_quota = true;
            p.quota = Quota{chance(50) ? uint8_t(KA_QUOTA_DAY) : uint8_t(KA_QUOTA_MONTH), 1 + rng_() % 1000};
        } else if (kind < 85) {
            p.states_quota = true;  // unlimited, stated
        }
        return p;
    }
    PlanRecord record_of(int i, const MPlan &p, bool popular) const {
        PlanRecord r;
        r.id = plan_id(i);
        r.name = "Plan " + std::to_string(i);
        r.price_paise = 100 * (i + 1);
        r.features = {"x"};
        r.popular = popular;
        r.sort_order = i * 10;
        if (p.states_quota) r.states |= KA_PLAN_STATES_QUOTA;
        r.quota = p.quota;
        return r;
    }

    // What the model expects a write to answer: "" accepted, else the code
    // (or "invalid:FIELD" for a kInvalid refusal).
    template <class Fn>
    std::string outcome(Fn &&fn) {
        try {
            fn();
        } catch (const StoreError &e) {
            return e.kind() == StoreError::Kind::kInvalid ? "invalid:" + e.field() : e.code();
        }
        return "";
    }
    void expect(const std::string &what, const std::string &got, const std::string &want) {
        note(what + " -> " + (got.empty() ? "ok" : got) + " (model: " + (want.empty() ? "ok" : want) + ")");
        if (got != want) fail(what + ": got " + (got.empty() ? "ok" : got) + ", the model says " + (want.empty() ? "ok" : want));
    }

    // Puts `plans` (new terms for each) in force with `retire`; returns the store's answer.
    std::string apply_import(const std::set<int> &plans, const PlanRetirements &retire) {
        std::map<int, MPlan> next;
        std::vector<PlanRecord> records;
        for (int i : plans) {
            next[i] = random_plan();
            records.push_back(record_of(i, next[i], records.empty()));
        }
        const std::string got = outcome([&] { world_.store().import_plans(records, {}, retire); });
        if (got.empty()) catalog_ = next;
        return got;
    }

    void import_step() {
        std::set<int> plans;
        while (plans.empty())
            for (int i = 0; i < kPlans; i++)
                if (chance(65)) plans.insert(i);
        auto kept = [&](const std::string &id) { return plans.count(id[1] - '0') > 0; };
        PlanRetirements retire;
        for (const auto &a : accounts_)
            if (!a.plan.empty() && !kept(a.plan) && !retire.count(a.plan) && chance(75)) {
                auto it = plans.begin();
                std::advance(it, rng_() % plans.size());
                retire[a.plan] = plan_id(*it);
            }
        if (chance(8)) {  // a retirement the import cannot take
            const int from = int(rng_() % kPlans), to = int(rng_() % (kPlans + 1));
            retire[plan_id(from)] = to == kPlans ? "zz" : plan_id(to);
        }
        // the model: retirements checked first, then the accounts left behind
        std::string want;
        for (const auto &[from, to] : retire)
            if (kept(from) || to == "zz" || !kept(to)) want = "invalid:retire";
        if (want.empty())
            for (const auto &a : accounts_)
                if (!a.plan.empty() && !kept(a.plan) && !retire.count(a.plan)) want = "PLAN_IN_USE";
        std::string what = "import {";
        for (int i : plans) what += plan_id(i) + " ";
        what += "}";
        for (const auto &[from, to] : retire) what += " " + from + "=" + to;
        const std::string got = apply_import(plans, retire);
        expect(what, got, want);
        if (!got.empty() || !want.empty()) return;
        for (auto &a : accounts_)
            if (!a.plan.empty() && !kept(a.plan)) {
                a.plan = retire.at(a.plan);
                a.audit_events++;
            }
        for (const auto &[i, p] : catalog_) note("  " + plan_id(i) + (p.states_quota ? " quota " + quota_text(p.quota) : " states no quota"));
    }

    void set_plan_step() {
        MAccount &a = accounts_[rng_() % kAccounts];
        const int pick = int(rng_() % (kPlans + 2));
        const std::optional<std::string> plan =
            pick == kPlans ? std::nullopt : std::optional<std::string>(pick == kPlans + 1 ? "zz" : plan_id(pick));
        std::string want;
        if (plan && (*plan == "zz" || !catalog_.count((*plan)[1] - '0'))) want = "PLAN_NOT_FOUND";
        const std::string got = outcome([&] { world_.store().set_plan(a.id, plan); });
        expect("set-plan " + id_to_string(kAccountIdPrefix, a.id).substr(20) + " " + plan.value_or("none"), got, want);
        if (!got.empty() || !want.empty()) return;
        if (a.plan != plan.value_or("")) {
            a.plan = plan.value_or("");
            a.audit_events++;
        }
    }

    void quota_step() {
        MAccount &a = accounts_[rng_() % kAccounts];
        AccountChanges c;
        const int kind = int(rng_() % 3);
        std::string want, what = "quota " + id_to_string(kAccountIdPrefix, a.id).substr(20) + " ";
        bool changes = false;
        if (kind == 0) {  // follow the plan
            c.follow_plan = KA_OVERRIDE_QUOTA;
            what += "plan";
            if (a.plan.empty() || !catalog_.count(a.plan[1] - '0')) want = "ACCOUNT_HAS_NO_PLAN";
            changes = a.own_quota || !a.quota.none();
        } else {
            c.quota = kind == 1 ? Quota{} : Quota{chance(50) ? uint8_t(KA_QUOTA_DAY) : uint8_t(KA_QUOTA_MONTH), 1 + rng_() % 50};
            what += quota_text(*c.quota);
            changes = !a.own_quota || *c.quota != a.quota;
        }
        const std::string got = outcome([&] { world_.store().update_account(a.id, c); });
        expect(what, got, want);
        if (!got.empty() || !want.empty()) return;
        if (c.quota) {
            a.own_quota = true;
            a.quota = *c.quota;
        } else {
            a.own_quota = false;
            a.quota = Quota{};
        }
        if (changes) a.audit_events++;
    }

    // What counts against the account: its own value, or its plan's when it
    // follows a plan of the catalog that states one.
    Quota effective(const MAccount &a) const {
        if (!a.own_quota && !a.plan.empty()) {
            auto it = catalog_.find(a.plan[1] - '0');
            if (it != catalog_.end() && it->second.states_quota) return it->second.quota;
        }
        return a.quota;
    }

    void check_all() {
        Store &s = world_.store();
        std::set<std::string> in_store;
        for (const auto &p : s.list_plans()) in_store.insert(p.id);
        std::set<std::string> in_model;
        for (const auto &[i, p] : catalog_) in_model.insert(plan_id(i));
        if (in_store != in_model) return fail("the catalog differs from the model's");
        ka_edge_t *edge = world_.edge();
        for (const MAccount &a : accounts_) {
            const std::string name = "account " + id_to_string(kAccountIdPrefix, a.id).substr(20);
            auto on = s.find_account_on_plan(a.id);
            if (!on) return fail(name + " is gone");
            if (on->account.record.plan_id != a.plan)
                return fail(name + " is on \"" + on->account.record.plan_id + "\", the model says \"" + a.plan + "\"");
            if (!a.plan.empty() && !in_store.count(a.plan))
                return fail(name + " is on plan " + a.plan + ", which the catalog lacks");
            const Quota want = effective(a);
            if (on->effective.quota != want)
                return fail(name + " has quota " + quota_text(on->effective.quota) + ", the model " + quota_text(want));
            const std::string header = "Bearer " + a.secret;
            ka_auth_result_t res;
            ka_edge_authenticate(edge, header.data(), header.size(), nullptr, nullptr, 0, wall_clock_ms(), &res);
            if (res.verdict != KA_AUTH_OK) return fail(name + "'s key: the edge says " + std::to_string(res.verdict));
            const Quota at_edge{res.account_quota_period, res.account_quota_units};
            if (at_edge != want)
                return fail(name + ": the edge counts " + quota_text(at_edge) + ", the model " + quota_text(want));
            const size_t events = s.list_audit(a.id, Store::kMaxPageSize, std::nullopt).events.size();
            if (events != a.audit_events)
                return fail(name + " has " + std::to_string(events) + " audit events, the model " +
                            std::to_string(a.audit_events));
        }
    }

    std::mt19937_64 rng_;
    ModelStore world_;
    std::map<int, MPlan> catalog_;
    std::vector<MAccount> accounts_;
    int step_ = 0;
    std::string failure_;
    std::string log_;
};

class PlanModelTest : public ::testing::TestWithParam<Backend> {};

TEST_P(PlanModelTest, NoWriteLeavesAnAccountOnAPlanTheCatalogLacks) {
    const bool lmdb = GetParam() == Backend::kLmdb;
    keyauth::testing::run_model<Harness>(GetParam(), "KEYAUTH_PLAN_MODEL", lmdb ? 300 : 12, lmdb ? 40 : 25,
                                         "PlanModel");
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanModelTest, keyauth::testing::kBothBackends, keyauth::testing::backend_name);

}  // namespace
