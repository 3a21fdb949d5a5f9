// keyauthctl plans, fx, init and doctor, and the dispatch to every group.
#include "commands.h"

#include <fstream>
#include <sstream>

#include "catalog_json.h"
#include "command_support.h"
#include "doctor.h"
#include "money.h"
#include "rfc3339.h"
#include "terminal_text.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

// --retire OLD=NEW, each plan retired once.
keyauth::PlanRetirements retirements_of(const Args &a) {
    keyauth::PlanRetirements out;
    for (const std::string &r : a.all("retire")) {
        std::string error;
        if (!keyauth::add_retirement(r, out, error)) throw UsageError("--retire \"" + shown(r) + "\": " + error);
    }
    return out;
}

}  // namespace

int run_plans(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "import") {
        if (a.words.size() != 3) throw UsageError("plans import takes one FILE");
        std::ifstream in(a.words[2], std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + a.words[2]);
        std::stringstream text;
        text << in.rdbuf();
        // a bad file is the caller's input, refused whole before anything is written: exit 2
        // (so is a --retire the file cannot take)
        const keyauth::PlanRetirements retire = retirements_of(a);
        std::vector<keyauth::PlanRecord> plans;
        keyauth::CatalogImport done;
        try {
            plans = keyauth::parse_catalog(text.str());
            keyauth::validate_catalog(plans);
            done = store.import_plans(plans, operator_actor(), retire);
        } catch (const keyauth::StoreError &e) {
            if (e.kind() != keyauth::StoreError::Kind::kInvalid) throw;
            throw InputError(std::string(e.what()) + " (nothing was imported)");
        }
        json moved = json::array();
        std::string text_out = "imported " + std::to_string(plans.size()) + " plans\n";
        for (const auto &[from, count] : done.moved) {
            moved.push_back({{"from", from}, {"to", retire.at(from)}, {"accounts", count}});
            text_out += terminal_safe("moved " + std::to_string(count) + (count == 1 ? " account" : " accounts") +
                                      " from plan " + from + " to " + retire.at(from)) +
                        "\n";
        }
        print(as_json, json{{"imported", plans.size()}, {"removed", done.removed}, {"moved", moved}}, text_out);
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const auto &p : store.list_plans()) {
            arr.push_back(keyauth::plan_to_json(p));
            text += terminal_safe(std::to_string(p.sort_order) + "  " + p.id + "  " +
                                  arr.back()["priceInr"].get<std::string>() + " INR  " + p.name +
                                  (p.popular ? "  (popular)" : "")) +
                    "\n";
        }
        print(as_json, json{{"plans", arr}}, text);
        return 0;
    }
    if (verb == "show") {
        auto plan = store.find_plan(a.words.at(2));
        if (!plan)
            throw keyauth::StoreError(keyauth::StoreError::Kind::kNotFound, "planId",
                                      "no plan \"" + shown(a.words.at(2)) + "\"", "PLAN_NOT_FOUND");
        json j = keyauth::plan_to_json(*plan);
        print(as_json, j, terminal_safe(plan->id + "  " + j["priceInr"].get<std::string>() + " INR  " + plan->name) +
                              "\n" + terminal_safe("  entitlements " + j["entitlements"].dump()) + "\n");
        return 0;
    }
    throw UsageError("unknown plans command \"" + verb + "\"");
}

int run_fx(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    std::optional<keyauth::FxRecord> fx;
    if (verb == "set") {
        uint64_t micro = 0;
        if (a.words.size() != 3 || !keyauth::parse_rate(a.words[2], micro))
            throw UsageError("fx set takes RATE: INR per USD, a positive decimal with at most 6 decimals");
        fx = store.set_exchange_rate(micro, operator_actor());
    } else if (verb == "show") {
        fx = store.exchange_rate();
        if (!fx) {
            print(as_json, json{{"exchangeRate", nullptr}}, "no exchange rate set\n");
            return 0;
        }
    } else {
        throw UsageError("unknown fx command \"" + verb + "\"");
    }
    char rate[keyauth::kRateTextMax];
    keyauth::format_rate(fx->inr_per_usd_micro, rate);
    print(as_json, json{{"exchangeRate", rate}, {"setAt", keyauth::format_time(fx->set_ms)}},
          std::string("1 USD = ") + rate + " INR (set " + keyauth::format_time(fx->set_ms) + ")\n");
    return 0;
}

int run_init(const std::string &db, const Args &a) {
    print(a.as_json, json{{"db", db}, {"schemaVersion", KA_SCHEMA_VERSION}},
          "keyauth store ready at " + db + "\n");
    return 0;
}

int run_init_etcd(keyauth::Store &store, const std::string &endpoints, const Args &a) {
    store.exchange_rate();  // a read: the cluster answers, or this throws
    print(a.as_json, json{{"etcd", endpoints}, {"schemaVersion", KA_SCHEMA_VERSION}},
          "keyauth store ready on etcd " + endpoints + "\n");
    return 0;
}

int run(keyauth::Store &store, const Args &a) {
    const std::string &group = a.words[0];
    if (group == "account") return run_account(store, a);
    if (group == "plans") return run_plans(store, a);
    if (group == "fx") return run_fx(store, a);
    if (group == "audit") return run_audit(store, a);
    if (group == "usage") return run_usage(store, a);
    if (group == "admin-token") return run_admin_token(store, a);
    if (group == "webhook") return run_webhook(store, a);
    if (group == "config") return run_config(store, a);
    return run_key(store, a);
}

int run_doctor(const std::string &db, const Args &a) {
    const bool as_json = a.as_json;
    auto findings = keyauth::diagnose(db, a.opt("user"));
    json arr = json::array();
    std::string text;
    bool failed = false;
    for (const auto &f : findings) {
        const char *level = f.level == keyauth::Finding::Level::kOk     ? "ok"
                            : f.level == keyauth::Finding::Level::kWarn ? "warn"
                                                                        : "fail";
        failed = failed || f.level == keyauth::Finding::Level::kFail;
        arr.push_back({{"level", level}, {"message", f.message}});
        // messages name paths and users of the host
        text += std::string(level) + (f.level == keyauth::Finding::Level::kOk ? "    " : "  ") +
                terminal_safe(f.message) + "\n";
    }
    print(as_json, json{{"findings", arr}}, text);
    return failed ? 1 : 0;
}

}  // namespace keyauthctl
