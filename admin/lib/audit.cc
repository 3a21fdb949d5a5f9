#include "audit.h"

#include <cstring>
#include <stdexcept>

#include "admin_tokens.h"
#include "keyauth_schema.h"
#include "le.h"
#include "rfc3339.h"

namespace keyauth {
namespace {

using nlohmann::json;

json actor_json(const Actor &a) {
    if (a.type == Actor::Type::kConsole)
        return {{"type", "console"}, {"account", id_to_string(kAccountIdPrefix, a.account)}};
    if (a.type == Actor::Type::kAdmin)
        return {{"type", "admin"}, {"token", a.user}, {"tokenId", id_to_string(kAdminTokenIdPrefix, a.token)}};
    if (a.type == Actor::Type::kSecretScanning) return {{"type", "secret_scanning"}, {"source", a.user}};
    return {{"type", "operator"}, {"user", a.user}};
}

}  // namespace

Actor Actor::console(const Id &account, std::string address) {
    Actor a;
    a.type = Type::kConsole;
    a.account = account;
    a.address = std::move(address);
    return a;
}

Actor Actor::admin(const Id &token, std::string name, std::string address) {
    Actor a;
    a.type = Type::kAdmin;
    a.token = token;
    a.user = std::move(name);
    a.address = std::move(address);
    return a;
}

Actor Actor::secret_scanning(std::string source, std::string address) {
    Actor a;
    a.type = Type::kSecretScanning;
    a.user = std::move(source);
    a.address = std::move(address);
    return a;
}

Actor Actor::operator_named(std::string user) {
    Actor a;
    a.type = Type::kOperator;
    a.user = std::move(user);
    a.address = "local";
    return a;
}

void AuditEvent::change(const std::string &field, json from, json to) {
    changes[field] = {{"from", std::move(from)}, {"to", std::move(to)}};
}

// The event id is stored inverted, so that an account's range, read
// forward, yields its newest event first.
std::string audit_key(const Id &account, const Id &event) {
    std::string k(reinterpret_cast<const char *>(account.data()), account.size());
    for (unsigned char b : event) k.push_back(static_cast<char>(~b));
    return k;
}

std::string encode_audit_record(const AuditEvent &e) {
    json body = {{"at", e.at_ms},
                 {"actor", actor_json(e.actor)},
                 {"address", e.actor.address},
                 {"action", e.action},
                 {"target", {{"type", e.target_type}, {"id", e.target_id}}},
                 {"changes", e.changes}};
    std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > KA_AUDIT_JSON_MAX) throw std::invalid_argument("audit event too large");
    std::string out(KA_AUDIT_RECORD_HEAD, '\0');
    store_le<uint16_t>(reinterpret_cast<unsigned char *>(out.data()), KA_AUDIT_RECORD_V1);
    return out + text;
}

std::optional<AuditEvent> decode_audit_record(std::string_view key, std::string_view value) {
    if (key.size() != KA_AUDIT_KEY_LEN || value.size() < KA_AUDIT_RECORD_HEAD ||
        value.size() > KA_AUDIT_RECORD_HEAD + KA_AUDIT_JSON_MAX ||
        load_le<uint16_t>(reinterpret_cast<const unsigned char *>(value.data())) != KA_AUDIT_RECORD_V1) {
        return std::nullopt;
    }
    json body = json::parse(value.substr(KA_AUDIT_RECORD_HEAD), nullptr, false);
    if (!body.is_object()) return std::nullopt;
    AuditEvent e;
    std::memcpy(e.account.data(), key.data(), KA_ID_LEN);
    for (size_t i = 0; i < KA_ID_LEN; i++) e.id[i] = static_cast<unsigned char>(~key[KA_ID_LEN + i]);
    try {
        const json &at = body.at("at");
        if (!at.is_number_integer()) return std::nullopt;
        e.at_ms = at.get<int64_t>();
        const json &actor = body.at("actor");
        if (actor.at("type") == "console") {
            if (!parse_id(kAccountIdPrefix, actor.at("account").get<std::string>(), e.actor.account))
                return std::nullopt;
            e.actor.type = Actor::Type::kConsole;
        } else if (actor.at("type") == "admin") {
            if (!parse_id(kAdminTokenIdPrefix, actor.at("tokenId").get<std::string>(), e.actor.token))
                return std::nullopt;
            e.actor.type = Actor::Type::kAdmin;
            e.actor.user = actor.at("token").get<std::string>();
        } else if (actor.at("type") == "secret_scanning") {
            e.actor.type = Actor::Type::kSecretScanning;
            e.actor.user = actor.at("source").get<std::string>();
        } else {
            e.actor.type = Actor::Type::kOperator;
            e.actor.user = actor.at("user").get<std::string>();
        }
        e.actor.address = body.at("address").get<std::string>();
        e.action = body.at("action").get<std::string>();
        e.target_type = body.at("target").at("type").get<std::string>();
        e.target_id = body.at("target").at("id").get<std::string>();
        e.changes = body.at("changes");
        if (!e.changes.is_object()) return std::nullopt;
    } catch (const json::exception &) {
        return std::nullopt;
    }
    return e;
}

json audit_to_json(const AuditEvent &e) {
    return {{"id", id_to_string(kEventIdPrefix, e.id)},
            {"at", format_time(e.at_ms)},
            {"actor", actor_json(e.actor)},
            {"address", e.actor.address.empty() ? json(nullptr) : json(e.actor.address)},
            {"action", e.action},
            {"target", {{"type", e.target_type},
                        {"id", e.target_id.empty() ? json(nullptr) : json(e.target_id)}}},
            {"changes", e.changes}};
}

}  // namespace keyauth
