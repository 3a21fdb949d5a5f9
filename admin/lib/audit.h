// The audit trail: who did what to which key or account, recorded by the
// Store in the same write as the change itself (DESIGN.md, "Audit event").
// An event never holds a secret, a console token or a hash of either: the
// Store builds each one from ids, names and the changed fields only.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"

namespace keyauth {

// Who asks for a write: a console user of an account (through keyauthd,
// from a client address nginx passed on), an operator at keyauthctl, or one
// of the business's services through the admin API, by its admin token.
struct Actor {
    enum class Type { kConsole, kOperator, kAdmin, kSecretScanning };
    Type type = Type::kOperator;
    Id account{};         // console
    // operator: the login name running keyauthctl; admin: the token's name;
    // secret scanning: the scanner ("github")
    std::string user;
    Id token{};           // admin: the token's id
    std::string address;  // console, admin: the client's address; operator: "local"

    static Actor console(const Id &account, std::string address);
    static Actor operator_named(std::string user);
    static Actor admin(const Id &token, std::string name, std::string address);
    static Actor secret_scanning(std::string source, std::string address);
};

struct AuditEvent {
    Id id{};
    Id account{};  // whose trail it is in; zero: the operator's own (plans, fx)
    int64_t at_ms = 0;
    Actor actor;
    std::string action;       // key.create, account.suspend, ...
    std::string target_type;  // key, account, plans, fx
    std::string target_id;    // "key_...", "acc_...", or "" for plans and fx
    nlohmann::json changes = nlohmann::json::object();  // field -> {from, to}

    void change(const std::string &field, nlohmann::json from, nlohmann::json to);
};

// The audit table's key: account ++ event id (inverted: newest first).
std::string audit_key(const Id &account, const Id &event);
// The stored value (u16 version, u16 reserved, event JSON); throws
// std::invalid_argument if the event is over KA_AUDIT_JSON_MAX bytes.
std::string encode_audit_record(const AuditEvent &event);
// nullopt if the key or value is not an audit record this build reads.
std::optional<AuditEvent> decode_audit_record(std::string_view key, std::string_view value);

// {id, at, actor, address, action, target, changes}, as GET /v1/audit shows it.
nlohmann::json audit_to_json(const AuditEvent &event);

struct AuditPage {
    std::vector<AuditEvent> events;  // newest first
    std::optional<Id> next;          // the last event id of this page, if more follow
};

}  // namespace keyauth
