// keyauthctl account create|list|show|update|set-plan|set-entitlement|suspend|resume|rotate-token.
#include "command_support.h"
#include "commands.h"
#include "key_json.h"
#include "terminal_text.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

// id, effective rate, status, name
std::string account_line(const json &j) {
    return terminal_safe(j["id"].get<std::string>() + "  " + std::to_string(j["rateLimitPerMinute"].get<uint32_t>()) +
                         "/min  " + j["status"].get<std::string>() + "  " + j["name"].get<std::string>()) +
           "\n";
}

std::string scopes_text(const json &allowed) {
    if (allowed.is_null()) return "any";
    std::string s;
    for (const auto &x : allowed) s += (s.empty() ? "" : ",") + x.get<std::string>();
    return s;
}

std::string quota_text(const json &q) {
    if (q.is_null()) return "no quota";
    std::string s = "quota " + std::to_string(q["units"].get<uint64_t>()) + "/" + q["period"].get<std::string>() +
                    (q["used"].is_null() ? std::string(": use not readable now")
                                         : ": " + std::to_string(q["used"].get<uint64_t>()) + " used, " +
                                               std::to_string(q["remaining"].get<int64_t>()) + " remaining");
    return s + (q["resetsAt"].is_null() ? "" : ", resets " + q["resetsAt"].get<std::string>());
}

// The account as show and the writes print it: its line, then its plan
// and effective controls, and which of them are its own.
void print_account(const Args &a, const json &j, const std::string &headline) {
    std::string own;
    for (const auto &o : j["overrides"]) own += (own.empty() ? "" : ", ") + o.get<std::string>();
    const std::string plan = j["planId"].is_null() ? "no plan" : "plan " + j["planId"].get<std::string>();
    print(a.as_json, j,
          headline + account_line(j) +
              terminal_safe("  " + plan + ", max keys " + std::to_string(j["maxKeys"].get<uint32_t>()) +
                            ", allowed scopes " + scopes_text(j["allowedScopes"]) + ", from " +
                            (j.value("allowedIps", json()).is_null() ? "any address" : scopes_text(j["allowedIps"])) +
                            ", created " +
                            j["createdAt"].get<std::string>()) +
              "\n  " + quota_text(j["quota"]) + "\n" +
              (j["planId"].is_null() ? "" : terminal_safe("  its own (not the plan's): " + (own.empty() ? "none" : own)) + "\n"));
}

// N, or "plan" (follow the plan: sets `bit` in follow_plan).
std::optional<uint32_t> own_or_plan(const Args &a, const char *name, uint8_t bit, keyauth::AccountChanges &c) {
    auto v = a.opt(name);
    if (!v) return std::nullopt;
    if (*v == "plan") {
        c.follow_plan |= bit;
        return std::nullopt;
    }
    return parse_u32(*v, (std::string("--") + name).c_str());
}

// --quota UNITS/day|UNITS/month|none (and "plan" where allow_plan).
void quota_of(const Args &a, keyauth::AccountChanges &c, bool allow_plan) {
    auto v = a.opt("quota");
    if (!v) return;
    c.quota = parse_quota_arg(*v, keyauth::QuotaOwner::kAccountOrPlan, allow_plan);
    if (!c.quota) c.follow_plan |= KA_OVERRIDE_QUOTA;
}

// --max-keys and --allowed-scope, as create and update take them.
keyauth::AccountChanges controls_of(const Args &a, bool allow_plan) {
    keyauth::AccountChanges c;
    if (allow_plan) {
        c.max_keys = own_or_plan(a, "max-keys", KA_OVERRIDE_MAX_KEYS, c);
    } else if (auto max = a.opt("max-keys")) {
        c.max_keys = parse_u32(*max, "--max-keys");
    }
    if (a.has("allowed-scope")) {
        if (a.has("any-scope")) throw UsageError("--allowed-scope and --any-scope contradict each other: give one");
        c.allowed_scopes = a.all("allowed-scope");
    }
    if (a.has("any-scope")) c.allowed_scopes = std::vector<std::string>{};
    c.allowed_ips = allow_ip_arg(a);
    c.meta = meta_arg(a);
    quota_of(a, c, allow_plan);
    return c;
}

int account_create(keyauth::Store &store, const Args &a) {
    keyauth::AccountChanges controls = controls_of(a, false);
    controls.plan_id = a.opt("plan");
    auto ent = a.opt("entitlement");
    if (!ent && !controls.plan_id) throw UsageError("account create needs --entitlement (or --plan)");
    // read before the write: nothing may fail between the commit and the token's printing
    std::optional<keyauth::PlanRecord> plan;
    if (controls.plan_id) plan = store.find_plan(*controls.plan_id);
    auto made = store.create_account(a.need("name"), ent ? parse_u32(*ent, "--entitlement") : 0, controls,
                                     operator_actor());
    json j = account_json(store, made.account, plan);
    j["consoleToken"] = made.console_token;
    print(a.as_json, j,
          "account " + j["id"].get<std::string>() + " created\nconsole token (shown once): " +
              made.console_token + "\n");
    return 0;
}

int account_list(keyauth::Store &store, const Args &a) {
    json arr = json::array();
    std::string text;
    for (const auto &acc : store.list_accounts()) {
        arr.push_back(account_json(store, acc));
        text += account_line(arr.back());
    }
    print(a.as_json, json{{"accounts", arr}}, text);
    return 0;
}

int account_show(keyauth::Store &store, const Args &a) {
    Id id = account_arg(a);
    auto acc = store.find_account(id);
    if (!acc)
        throw keyauth::StoreError(keyauth::StoreError::Kind::kNotFound, "account",
                                  "no account " + keyauth::id_to_string(keyauth::kAccountIdPrefix, id));
    print_account(a, account_json(store, *acc), "");
    return 0;
}

int account_update(keyauth::Store &store, const Args &a) {
    Id id = account_arg(a);
    keyauth::AccountChanges changes = controls_of(a, true);
    changes.name = a.opt("name");
    changes.entitlement_rpm = own_or_plan(a, "entitlement", KA_OVERRIDE_RATE, changes);
    if (changes.empty())
        throw UsageError(
            "account update needs something to change: --name, --entitlement, --max-keys, --quota, "
            "--allowed-scope, --any-scope, --allow-ip or --meta");
    keyauth::Account updated;
    try {
        updated = store.update_account(id, changes, operator_actor());
    } catch (const keyauth::StoreError &e) {
        // "plan" without a plan is a mistake in the command, not a refusal
        // of the store's state to wait out: exit 2, as a usage error
        if (e.code() != "ACCOUNT_HAS_NO_PLAN") throw;
        throw InputError(std::string(e.what()) + " (ACCOUNT_HAS_NO_PLAN; nothing was changed)");
    }
    print_account(a, account_json(store, updated), "account updated\n");
    return 0;
}

int account_set_plan(keyauth::Store &store, const Args &a) {
    Id id = account_arg(a);
    const std::string plan = a.words.at(3);
    auto acc = store.set_plan(id, plan == "none" ? std::nullopt : std::optional<std::string>(plan), operator_actor());
    print_account(a, account_json(store, acc), "account " + keyauth::id_to_string(keyauth::kAccountIdPrefix, id) +
                                                   (plan == "none" ? " is on no plan\n" : " is on plan " + terminal_safe(plan) + "\n"));
    return 0;
}

int account_set_entitlement(keyauth::Store &store, const Args &a) {
    Id id = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
    auto acc = store.set_entitlement(id, parse_u32(a.need("entitlement"), "--entitlement"), operator_actor());
    json j = account_json(store, acc);
    print(a.as_json, j,
          "account " + j["id"].get<std::string>() + " entitlement " + std::to_string(acc.record.entitlement_rpm) +
              "/min\n");
    return 0;
}

int account_suspend(keyauth::Store &store, const Args &a, bool suspend) {
    auto acc = store.set_suspended(account_arg(a), suspend, operator_actor());
    json j = account_json(store, acc);
    print(a.as_json, j, "account " + j["id"].get<std::string>() + " " + j["status"].get<std::string>() + "\n");
    return 0;
}

int account_rotate_token(keyauth::Store &store, const Args &a) {
    const int64_t grace = grace_arg(a);
    const int64_t asked = store.now();
    // read before the write: nothing may fail between the commit and the token's printing
    auto before = store.find_account_on_plan(account_arg(a));
    auto made = store.rotate_console_token(account_arg(a), grace, operator_actor());
    json j = account_json(store, made.account, before ? before->plan : std::nullopt);
    j["consoleToken"] = made.console_token;
    j["graceSeconds"] = grace;
    print(a.as_json, j,
          "account " + j["id"].get<std::string>() + ": new console token (shown once): " + made.console_token +
              "\n" +
              (grace == 0 ? std::string("the previous token stopped now\n")
                          : "the previous token stops at about " + keyauth::format_time(asked + grace * 1000) +
                                "\n"));
    return 0;
}

}  // namespace

int run_account(keyauth::Store &store, const Args &a) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") return account_create(store, a);
    if (verb == "list") return account_list(store, a);
    if (verb == "show") return account_show(store, a);
    if (verb == "update") return account_update(store, a);
    if (verb == "set-entitlement") return account_set_entitlement(store, a);
    if (verb == "set-plan") return account_set_plan(store, a);
    if (verb == "suspend") return account_suspend(store, a, true);
    if (verb == "resume") return account_suspend(store, a, false);
    if (verb == "rotate-token") return account_rotate_token(store, a);
    throw UsageError("unknown account command \"" + verb + "\"");
}

}  // namespace keyauthctl
