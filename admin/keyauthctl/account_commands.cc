// keyauthctl account create|list|show|update|set-entitlement|suspend|resume|rotate-token.
#include "command_support.h"
#include "commands.h"
#include "key_json.h"
#include "terminal_text.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

// id, entitlement, status, name
std::string account_line(const keyauth::Account &acc, const json &j) {
    return terminal_safe(j["id"].get<std::string>() + "  " + std::to_string(acc.record.entitlement_rpm) + "/min  " +
                         j["status"].get<std::string>() + "  " + acc.record.name) +
           "\n";
}

std::string scopes_text(const json &allowed) {
    if (allowed.is_null()) return "any";
    std::string s;
    for (const auto &x : allowed) s += (s.empty() ? "" : ",") + x.get<std::string>();
    return s;
}

// The account as show and the writes print it: its line, then its controls.
void print_account(const Args &a, const keyauth::Account &acc, const std::string &headline) {
    json j = keyauth::account_to_json(acc);
    print(a.as_json, j,
          headline + account_line(acc, j) +
              terminal_safe("  max keys " + std::to_string(acc.record.max_keys) + ", allowed scopes " +
                            scopes_text(j["allowedScopes"]) + ", created " + j["createdAt"].get<std::string>()) +
              "\n");
}

// --max-keys and --allowed-scope, as create and update take them.
keyauth::AccountChanges controls_of(const Args &a) {
    keyauth::AccountChanges c;
    if (auto max = a.opt("max-keys")) c.max_keys = parse_u32(*max, "--max-keys");
    if (a.has("allowed-scope")) {
        if (a.has("any-scope")) throw UsageError("--allowed-scope and --any-scope contradict each other: give one");
        c.allowed_scopes = a.all("allowed-scope");
    }
    if (a.has("any-scope")) c.allowed_scopes = std::vector<std::string>{};
    return c;
}

int account_create(keyauth::Store &store, const Args &a) {
    auto made = store.create_account(a.need("name"), parse_u32(a.need("entitlement"), "--entitlement"),
                                     controls_of(a), operator_actor());
    json j = keyauth::account_to_json(made.account);
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
        arr.push_back(keyauth::account_to_json(acc));
        text += account_line(acc, arr.back());
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
    print_account(a, *acc, "");
    return 0;
}

int account_update(keyauth::Store &store, const Args &a) {
    Id id = account_arg(a);
    keyauth::AccountChanges changes = controls_of(a);
    changes.name = a.opt("name");
    if (auto ent = a.opt("entitlement")) changes.entitlement_rpm = parse_u32(*ent, "--entitlement");
    if (changes.empty())
        throw UsageError(
            "account update needs something to change: --name, --entitlement, --max-keys, --allowed-scope or "
            "--any-scope");
    print_account(a, store.update_account(id, changes, operator_actor()), "account updated\n");
    return 0;
}

int account_set_entitlement(keyauth::Store &store, const Args &a) {
    Id id = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
    auto acc = store.set_entitlement(id, parse_u32(a.need("entitlement"), "--entitlement"), operator_actor());
    json j = keyauth::account_to_json(acc);
    print(a.as_json, j,
          "account " + j["id"].get<std::string>() + " entitlement " + std::to_string(acc.record.entitlement_rpm) +
              "/min\n");
    return 0;
}

int account_suspend(keyauth::Store &store, const Args &a, bool suspend) {
    auto acc = store.set_suspended(account_arg(a), suspend, operator_actor());
    json j = keyauth::account_to_json(acc);
    print(a.as_json, j, "account " + j["id"].get<std::string>() + " " + j["status"].get<std::string>() + "\n");
    return 0;
}

int account_rotate_token(keyauth::Store &store, const Args &a) {
    const int64_t grace = grace_arg(a);
    const int64_t asked = store.now();
    auto made = store.rotate_console_token(account_arg(a), grace, operator_actor());
    json j = keyauth::account_to_json(made.account);
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
    if (verb == "suspend") return account_suspend(store, a, true);
    if (verb == "resume") return account_suspend(store, a, false);
    if (verb == "rotate-token") return account_rotate_token(store, a);
    throw UsageError("unknown account command \"" + verb + "\"");
}

}  // namespace keyauthctl
