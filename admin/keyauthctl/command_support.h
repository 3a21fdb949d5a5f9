// What keyauthctl's command files share: printing an answer as text or
// JSON, the operator named in the audit trail, and the arguments several
// commands take alike.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "command_line.h"
#include "quota_usage.h"
#include "store.h"

namespace keyauthctl {

void print(bool as_json, const nlohmann::json &j, const std::string &text);

// The Actor of every write keyauthctl makes.
keyauth::Actor operator_actor();

// Where keyauthctl reads what quotas used (main sets it; none: 0 used).
void set_quota_usage(std::unique_ptr<keyauth::QuotaUsageSource> source);
// What a key's quota (by its roll chain) used this period; 0 without one,
// nullopt if it cannot be read now (never an exception).
std::optional<uint64_t> key_quota_used(const keyauth::KeyRecord &key, int64_t now);

// The account's effective entitlement (its own or its plan's), to show a
// key's effective rate (0 if gone).
uint32_t entitlement_of(keyauth::Store &store, const keyauth::Id &account);

// The account object (key_json.h) with its plan and its quota's use, read
// now; `given` is the account as a write returned it, shown with its plan
// as the catalog holds it, or as read before (plan_read: after a create,
// nothing may fail between the commit and the token's printing).
nlohmann::json account_json(keyauth::Store &store, const keyauth::Account &given,
                            const std::optional<std::optional<keyauth::PlanRecord>> &plan_read = std::nullopt);

// The key object as key list and key show print it (never a secret).
nlohmann::json key_json(keyauth::Store &store, const keyauth::KeyRecord &key);

// One line of key list: id, prefix, status, effective rate, scopes, name.
// Every line of text keyauthctl prints that holds a stored string goes
// through terminal_safe (terminal_text.h); --json output is JSON's.
std::string key_line(const nlohmann::json &k);

// A long operation's progress on standard error, one line rewritten in
// place, when standard error is a terminal; nothing at all in a script.
class TerminalProgress {
public:
    TerminalProgress();
    ~TerminalProgress();  // ends the line it drew
    TerminalProgress(const TerminalProgress &) = delete;
    TerminalProgress &operator=(const TerminalProgress &) = delete;
    void say(const std::string &line);

private:
    bool on_;
    bool drawn_ = false;
};

// The positional id of an account or key command (its third word).
keyauth::Id account_arg(const Args &a);
keyauth::Id key_arg(const Args &a);
// --account, where a key command takes it to mean "a key of this account".
std::optional<keyauth::Id> owner_arg(const Args &a);
// --grace-seconds (default 0); the Store bounds it.
int64_t grace_arg(const Args &a);
// --allow-ip CIDR ... (packed, restrictions.h) or --allow-ip any (""); none
// given: nullopt. A bad CIDR is refused naming it, before anything is written.
std::optional<std::string> allow_ip_arg(const Args &a);
// --meta JSON: the compact object; --meta none: "" (removed); absent: nullopt.
std::optional<std::string> meta_arg(const Args &a);

}  // namespace keyauthctl
