#include "webhook_events.h"

#include <algorithm>

#include "admin_tokens.h"
#include "records.h"

namespace keyauth {
namespace {

struct Raised {
    const char *action;
    const char *type;
};

constexpr Raised kRaised[] = {
    {"key.create", "key.created"},         {"key.update", "key.updated"},
    {"key.roll", "key.rolled"},            {"key.revoke", "key.revoked"},
    {"account.create", "account.created"}, {"account.update", "account.updated"},
    {"account.set_plan", "account.plan_changed"}, {"account.suspend", "account.suspended"},
    {"account.resume", "account.resumed"}, {"key.leak", kKeyLeaked},
};

}  // namespace

const std::vector<std::string> &webhook_event_types() {
    static const std::vector<std::string> types = {
        "key.created",     "key.updated",          "key.rolled",        "key.revoked",
        kKeyExpiring,      kKeyLeaked,             "account.created",   "account.updated",
        "account.plan_changed", "account.suspended", "account.resumed", kQuotaThreshold,
    };
    return types;
}

bool is_webhook_event_type(std::string_view type) {
    const auto &all = webhook_event_types();
    return std::find(all.begin(), all.end(), type) != all.end();
}

std::optional<std::string> webhook_event_type_for(std::string_view audit_action) {
    for (const Raised &r : kRaised) {
        if (audit_action == r.action) return std::string(r.type);
    }
    return std::nullopt;
}

std::optional<OutboxEvent> outbox_event_from(const AuditEvent &e) {
    auto type = webhook_event_type_for(e.action);
    if (!type) return std::nullopt;
    OutboxEvent out;
    out.id = e.id;
    out.type = *type;
    out.at_ms = e.at_ms;
    if (!is_none(e.account)) out.account = e.account;
    nlohmann::json actor = {{"type", e.actor.type == Actor::Type::kConsole          ? "console"
                                     : e.actor.type == Actor::Type::kAdmin          ? "admin"
                                     : e.actor.type == Actor::Type::kSecretScanning ? "secret_scanning"
                                                                                    : "operator"}};
    if (e.actor.type == Actor::Type::kAdmin) actor["token"] = e.actor.user;
    if (e.actor.type == Actor::Type::kSecretScanning) actor["source"] = e.actor.user;
    out.data = {{"accountId", out.account ? nlohmann::json(id_to_string(kAccountIdPrefix, *out.account))
                                          : nlohmann::json(nullptr)},
                {"actor", actor},
                {"changes", e.changes}};
    if (e.target_type == "key") out.data["keyId"] = e.target_id;
    return out;
}

}  // namespace keyauth
