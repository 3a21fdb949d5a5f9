#include "command_support.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "key_json.h"
#include "quota_json.h"
#include "restrictions.h"
#include "strict_json.h"
#include "terminal_text.h"

namespace keyauthctl {

TerminalProgress::TerminalProgress() : on_(isatty(STDERR_FILENO) == 1) {}

TerminalProgress::~TerminalProgress() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
}

void TerminalProgress::say(const std::string &line) {
    if (!on_) return;
    std::cerr << "\r\033[K" << line << std::flush;
    drawn_ = true;
}

using keyauth::Id;
using nlohmann::json;

void print(bool as_json, const json &j, const std::string &text) {
    if (as_json) std::cout << j.dump(2) << "\n";
    else std::cout << text;
}

// Operators are named in the audit trail by the login that ran keyauthctl:
// the real uid's, or the one sudo was called from when keyauthctl runs
// under sudo as root. Anyone can set $SUDO_USER; only sudo (or root) starts
// a process of uid 0 with SUDO_UID set.
keyauth::Actor operator_actor() {
    const uid_t uid = getuid();
    const char *sudo_user = std::getenv("SUDO_USER");
    if (uid == 0 && std::getenv("SUDO_UID") && sudo_user && *sudo_user)
        return keyauth::Actor::operator_named(sudo_user);
    struct passwd *pw = getpwuid(uid);
    return keyauth::Actor::operator_named(pw ? pw->pw_name : std::to_string(uid));
}

namespace {
std::unique_ptr<keyauth::QuotaUsageSource> quota_usage;
}

void set_quota_usage(std::unique_ptr<keyauth::QuotaUsageSource> source) { quota_usage = std::move(source); }

std::optional<uint64_t> key_quota_used(const keyauth::KeyRecord &key, int64_t now) {
    return keyauth::quota_used_of(quota_usage.get(), keyauth::QuotaSubject::kKey, keyauth::quota_subject_id(key),
                                  key.quota, now);
}

uint32_t entitlement_of(keyauth::Store &store, const Id &account) {
    auto acc = store.find_account_on_plan(account);
    return acc ? acc->effective.rate_rpm : 0;
}

json account_json(keyauth::Store &store, const keyauth::Account &given,
                  const std::optional<std::optional<keyauth::PlanRecord>> &plan_read) {
    keyauth::AccountOnPlan on{given, std::nullopt, {}};
    if (plan_read) on.plan = *plan_read;
    else if (!given.record.plan_id.empty()) on.plan = store.find_plan(given.record.plan_id);
    on.effective = keyauth::effective_of(given.record, on.plan ? &*on.plan : nullptr);
    const int64_t now = store.now();
    return keyauth::account_to_json(
        on, keyauth::quota_used_of(quota_usage.get(), keyauth::QuotaSubject::kAccount, given.id, on.effective.quota, now),
        now);
}

json key_json(keyauth::Store &store, const keyauth::KeyRecord &key) {
    const int64_t now = store.now();
    json j = keyauth::key_to_json(key, entitlement_of(store, key.account_id), now, key_quota_used(key, now));
    keyauth::set_leak(j, store.key_leaks(key.account_id), key.key_id);
    return j;
}

namespace {
// "  from 10.0.0.0/8,2001:db8::/32" for a key limited to those addresses
std::string allowed_ips_note(const json &k) {
    const json ips = k.value("allowedIps", json());
    if (!ips.is_array()) return "";
    std::string out = "  from ";
    for (const auto &c : ips) out += (out.size() > 7 ? "," : "") + c.get<std::string>();
    return out;
}
}  // namespace

std::string key_line(const json &k) {
    std::string scopes;
    for (const auto &s : k["scopes"]) scopes += (scopes.empty() ? "" : ",") + s.get<std::string>();
    return terminal_safe(k["id"].get<std::string>() + "  " + k["prefix"].get<std::string>() + "...  " +
                         k["status"].get<std::string>() + (k.value("leak", json()).is_null() ? "" : " (leaked)") + "  " +
                         std::to_string(k["rateLimitPerMinute"].get<uint32_t>()) + "/min  " + scopes + "  " +
                         k["name"].get<std::string>() + allowed_ips_note(k)) +
           "\n";
}

// check_args has made sure the positional is there.
Id account_arg(const Args &a) { return parse_id_arg(keyauth::kAccountIdPrefix, a.words.at(2), "ACC_ID"); }

Id key_arg(const Args &a) { return parse_id_arg(keyauth::kKeyIdPrefix, a.words.at(2), "KEY_ID"); }

std::optional<Id> owner_arg(const Args &a) {
    if (auto acc = a.opt("account")) return parse_id_arg(keyauth::kAccountIdPrefix, *acc, "--account");
    return std::nullopt;
}

int64_t grace_arg(const Args &a) {
    auto grace = a.opt("grace-seconds");
    return grace ? parse_u32(*grace, "--grace-seconds") : 0;
}

std::optional<std::string> meta_arg(const Args &a) {
    auto given = a.opt("meta");
    if (!given) return std::nullopt;
    if (*given == "none") return std::string();
    std::string duplicate;
    const nlohmann::json parsed = keyauth::parse_json_strict(*given, duplicate);
    if (parsed.is_discarded()) throw UsageError("--meta must be a JSON object (or none): not valid JSON or UTF-8");
    if (!duplicate.empty()) throw UsageError("--meta names a member more than once");
    try {
        return keyauth::meta_from_json(parsed, "--meta");
    } catch (const keyauth::StoreError &e) {
        throw UsageError(e.what());
    }
}

std::optional<std::string> allow_ip_arg(const Args &a) {
    if (!a.has("allow-ip")) return std::nullopt;
    const std::vector<std::string> given = a.all("allow-ip");
    const bool any = std::find(given.begin(), given.end(), "any") != given.end();
    if (any && given.size() > 1) throw UsageError("--allow-ip any lifts the list: give it alone");
    if (any) return std::string();
    try {
        return keyauth::allowed_ips_from_texts(given, "--allow-ip");
    } catch (const keyauth::StoreError &e) {
        throw UsageError(e.what());
    }
}

}  // namespace keyauthctl
