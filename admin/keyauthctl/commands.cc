#include "commands.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "catalog_json.h"
#include "doctor.h"
#include "key_json.h"
#include "money.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

void print(bool as_json, const json &j, const std::string &text) {
    if (as_json) std::cout << j.dump(2) << "\n";
    else std::cout << text;
}

std::string key_line(const json &k) {
    std::string scopes;
    for (const auto &s : k["scopes"]) scopes += (scopes.empty() ? "" : ",") + s.get<std::string>();
    return k["id"].get<std::string>() + "  " + k["prefix"].get<std::string>() + "...  " +
           k["status"].get<std::string>() + "  " + std::to_string(k["rateLimitPerMinute"].get<uint32_t>()) +
           "/min  " + scopes + "  " + k["name"].get<std::string>() + "\n";
}

// Operators are named in the audit trail by the login that ran keyauthctl
// (the one sudo was called from, when it was).
keyauth::Actor operator_actor() {
    const char *sudo = std::getenv("SUDO_USER");
    if (sudo && *sudo) return keyauth::Actor::operator_named(sudo);
    struct passwd *pw = getpwuid(geteuid());
    return keyauth::Actor::operator_named(pw ? pw->pw_name : std::to_string(geteuid()));
}

uint32_t entitlement_of(keyauth::Store &store, const Id &account) {
    auto acc = store.find_account(account);
    return acc ? acc->record.entitlement_rpm : 0;
}

}  // namespace

int run_account(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") {
        keyauth::AccountChanges controls;
        if (auto max = a.opt("max-keys")) controls.max_keys = parse_u32(*max, "--max-keys");
        if (a.options.count("allowed-scope")) controls.allowed_scopes = a.all("allowed-scope");
        auto made = store.create_account(a.need("name"), parse_u32(a.need("entitlement"), "--entitlement"),
                                         controls, operator_actor());
        json j = keyauth::account_to_json(made.account);
        j["consoleToken"] = made.console_token;
        print(as_json, j,
              "account " + j["id"].get<std::string>() + " created\nconsole token (shown once): " +
                  made.console_token + "\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const auto &acc : store.list_accounts()) {
            json j = keyauth::account_to_json(acc);
            text += j["id"].get<std::string>() + "  " + std::to_string(acc.record.entitlement_rpm) +
                    "/min  " + j["status"].get<std::string>() + "  " + acc.record.name + "\n";
            arr.push_back(j);
        }
        print(as_json, json{{"accounts", arr}}, text);
        return 0;
    }
    if (verb == "set-entitlement") {
        Id id = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto acc = store.set_entitlement(id, parse_u32(a.need("entitlement"), "--entitlement"));
        json j = keyauth::account_to_json(acc);
        print(as_json, j,
              "account " + j["id"].get<std::string>() + " entitlement " +
                  std::to_string(acc.record.entitlement_rpm) + "/min\n");
        return 0;
    }
    throw UsageError("unknown account command \"" + verb + "\"");
}

int run_key(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") {
        Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto count = a.opt("count");
        const std::string name = a.need("name");
        const std::vector<std::string> scopes = a.all("scope");
        const uint32_t rate = parse_u32(a.need("rate"), "--rate");
        size_t left = count ? parse_u32(*count, "--count") : 1;
        if (left < 1 || left > 10'000'000) throw UsageError("--count must be from 1 to 10000000");
        // A store that takes fewer keys per write (etcd) gets them in
        // batches. Whatever fails, every key made is printed: its secret
        // exists nowhere else.
        json all = json::array();
        std::string text;
        auto report = [&] {
            if (all.empty()) return;
            print(as_json, count ? json{{"keys", all}} : all.front(), text);
        };
        try {
            uint32_t ent = 0;
            bool ent_known = false;
            while (left > 0) {
                size_t batch = std::min(left, store.max_keys_per_write());
                auto made = store.create_keys(account, name, scopes, rate, batch);
                left -= batch;
                if (!ent_known) ent = entitlement_of(store, account), ent_known = true;
                for (const auto &k : made) {
                    json j = keyauth::key_to_json(k.key, ent, store.now());
                    j["secret"] = k.secret;
                    text += "key " + j["id"].get<std::string>() + " created\nsecret (shown once): " +
                            k.secret + "\n";
                    all.push_back(std::move(j));
                }
            }
        } catch (...) {
            report();
            if (!all.empty())
                std::cerr << "keyauthctl: " << all.size() << " keys were created (printed above) before this error\n";
            throw;
        }
        report();
        return 0;
    }
    if (verb == "list") {
        Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto limit = a.opt("limit");
        auto cursor = a.opt("cursor");
        std::optional<Id> after;
        if (cursor) after = parse_id_arg(keyauth::kKeyIdPrefix, *cursor, "--cursor");
        auto page = store.list_keys(account, limit ? parse_u32(*limit, "--limit")
                                                   : keyauth::Store::kMaxPageSize,
                                    after);
        uint32_t ent = entitlement_of(store, account);
        json arr = json::array();
        std::string text;
        for (const auto &k : page.keys) {
            arr.push_back(keyauth::key_to_json(k, ent, store.now()));
            text += key_line(arr.back());
        }
        json next = page.next ? json(keyauth::id_to_string(keyauth::kKeyIdPrefix, *page.next))
                              : json(nullptr);
        if (page.next) text += "more: --cursor " + next.get<std::string>() + "\n";
        print(as_json, json{{"keys", arr}, {"nextCursor", next}}, text);
        return 0;
    }
    if (verb == "revoke") {
        if (a.words.size() != 3) throw UsageError("key revoke takes one KEY_ID");
        Id key = parse_id_arg(keyauth::kKeyIdPrefix, a.words[2], "KEY_ID");
        std::optional<Id> owner;
        if (auto acc = a.opt("account")) owner = parse_id_arg(keyauth::kAccountIdPrefix, *acc, "--account");
        auto rec = store.revoke_key(owner, key);
        json j = keyauth::key_to_json(rec, entitlement_of(store, rec.account_id), store.now());
        print(as_json, j, "key " + j["id"].get<std::string>() + " revoked\n");
        return 0;
    }
    throw UsageError("unknown key command \"" + verb + "\"");
}

int run_plans(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "import") {
        if (a.words.size() != 3) throw UsageError("plans import takes one FILE");
        std::ifstream in(a.words[2], std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + a.words[2]);
        std::stringstream text;
        text << in.rdbuf();
        auto plans = keyauth::parse_catalog(text.str());
        store.import_plans(plans);
        print(as_json, json{{"imported", plans.size()}},
              "imported " + std::to_string(plans.size()) + " plans\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const auto &p : store.list_plans()) {
            arr.push_back(keyauth::plan_to_json(p));
            text += std::to_string(p.sort_order) + "  " + p.id + "  " +
                    arr.back()["priceInr"].get<std::string>() + " INR  " + p.name +
                    (p.popular ? "  (popular)" : "") + "\n";
        }
        print(as_json, json{{"plans", arr}}, text);
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
        fx = store.set_exchange_rate(micro);
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
        text += std::string(level) + (f.level == keyauth::Finding::Level::kOk ? "    " : "  ") +
                f.message + "\n";
    }
    print(as_json, json{{"findings", arr}}, text);
    return failed ? 1 : 0;
}

}  // namespace keyauthctl
