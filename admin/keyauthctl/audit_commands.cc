// keyauthctl audit list: the audit trail, newest first.
#include "command_support.h"
#include "commands.h"
#include "terminal_text.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

constexpr uint32_t kDefaultAuditPage = 100;

// "name: \"a\" -> \"b\", scopes: null -> [\"ip:read\"]"
std::string changes_text(const json &changes) {
    std::string s;
    for (const auto &[field, change] : changes.items()) {
        s += (s.empty() ? "" : ", ") + field + ": " + change.value("from", json()).dump() + " -> " +
             change.value("to", json()).dump();
    }
    return s;
}

// time, actor, action, target, changes; the actor's name is whatever the
// operator's environment held, a change's values whatever was stored
std::string event_line(const json &e) {
    const json &actor = e["actor"];
    const std::string who = actor["type"] == "operator" ? "operator:" + actor.value("user", std::string())
                            : actor["type"] == "admin"  ? "admin:" + actor.value("token", std::string())
                                                        : "console:" + actor.value("account", std::string());
    const json &target = e["target"];
    std::string what = target["type"].get<std::string>();
    if (!target["id"].is_null()) what += " " + target["id"].get<std::string>();
    return terminal_safe(e["at"].get<std::string>() + "  " + who + "  " + e["action"].get<std::string>() + "  " +
                         what + "  " + changes_text(e["changes"])) +
           "\n";
}

}  // namespace

int run_audit(keyauth::Store &store, const Args &a) {
    std::optional<Id> account, after;
    if (auto acc = a.opt("account")) account = parse_id_arg(keyauth::kAccountIdPrefix, *acc, "--account");
    if (auto cursor = a.opt("cursor")) after = parse_id_arg(keyauth::kEventIdPrefix, *cursor, "--cursor");
    uint32_t limit = kDefaultAuditPage;
    if (auto l = a.opt("limit")) limit = parse_u32(*l, "--limit");
    if (limit < 1 || limit > keyauth::Store::kMaxPageSize)
        throw UsageError("--limit must be from 1 to " + std::to_string(keyauth::Store::kMaxPageSize));
    auto page = store.list_audit(account, limit, after);
    json arr = json::array();
    std::string text;
    for (const auto &e : page.events) {
        arr.push_back(keyauth::audit_to_json(e));
        text += event_line(arr.back());
    }
    json next = page.next ? json(keyauth::id_to_string(keyauth::kEventIdPrefix, *page.next)) : json(nullptr);
    if (page.next) text += "more: --cursor " + next.get<std::string>() + "\n";
    print(a.as_json, json{{"events", arr}, {"nextCursor", next}}, text);
    return 0;
}

}  // namespace keyauthctl
