// keyauthctl admin-token create|list|revoke: the tokens of the admin API.
#include "command_support.h"
#include "commands.h"
#include "terminal_text.h"

namespace keyauthctl {

using nlohmann::json;

namespace {

// Every --scope named, refused whole (exit 2) for a name that is no scope.
uint32_t scopes_arg(const Args &a) {
    uint32_t scopes = 0;
    for (const std::string &s : a.all("scope")) {
        const uint32_t bit = keyauth::admin_scope_named(s);
        if (bit == 0) {
            std::string known;
            for (const std::string &n : keyauth::admin_scope_names()) known += (known.empty() ? "" : ", ") + n;
            throw UsageError("--scope \"" + shown(s) + "\" is not an admin scope (" + known + ")");
        }
        scopes |= bit;
    }
    return scopes;
}

std::string token_line(const json &t) {
    std::string scopes;
    for (const auto &s : t["scopes"]) scopes += (scopes.empty() ? "" : ",") + s.get<std::string>();
    return terminal_safe(t["id"].get<std::string>() + "  " + t["status"].get<std::string>() + "  " + scopes + "  " +
                         t["name"].get<std::string>()) +
           "\n";
}

}  // namespace

int run_admin_token(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.at(1);
    if (verb == "create") {
        const uint32_t scopes = scopes_arg(a);
        keyauth::Expiry expires;
        if (auto t = a.opt("expires-at")) expires = parse_time_arg(*t, "--expires-at", false);
        keyauth::CreatedAdminToken made = store.create_admin_token(a.need("name"), scopes, expires, operator_actor());
        json j = keyauth::admin_token_json(made.token, store.now());
        j["token"] = made.secret;
        print(as_json, j,
              token_line(j) + "token (shown once; keep it in the service's secret store): " + made.secret + "\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const keyauth::AdminToken &t : store.list_admin_tokens()) {
            arr.push_back(keyauth::admin_token_json(t, store.now()));
            text += token_line(arr.back());
        }
        print(as_json, json{{"adminTokens", arr}}, text.empty() ? "no admin tokens\n" : text);
        return 0;
    }
    const keyauth::Id id = parse_id_arg(keyauth::kAdminTokenIdPrefix, a.words.at(2), "TOKEN_ID");
    json j = keyauth::admin_token_json(store.revoke_admin_token(id, operator_actor()), store.now());
    print(as_json, j, token_line(j));
    return 0;
}

}  // namespace keyauthctl
