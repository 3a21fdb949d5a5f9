// keyauthctl key create|list|show|update|roll|revoke.
#include <algorithm>
#include <iostream>

#include "command_support.h"
#include "leak_outcome.h"
#include "commands.h"
#include "key_json.h"

namespace keyauthctl {

using keyauth::Id;
using nlohmann::json;

namespace {

// --quota UNITS/day|UNITS/month|UNITS/total|none
std::optional<keyauth::Quota> key_quota_arg(const Args &a) {
    auto v = a.opt("quota");
    return v ? parse_quota_arg(*v, keyauth::QuotaOwner::kKey, false) : std::nullopt;
}

// A new key's object with its secret: the one time it is ever printed.
json with_secret(const keyauth::CreatedKey &k, uint32_t entitlement, int64_t now, std::string &text) {
    json j = keyauth::key_to_json(k.key, entitlement, now, key_quota_used(k.key, now));
    j["secret"] = k.secret;
    text += "key " + j["id"].get<std::string>() + " created\nsecret (shown once): " + k.secret + "\n";
    return j;
}

int key_create(keyauth::Store &store, const Args &a) {
    Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
    auto count = a.opt("count");
    keyauth::KeySpec spec;
    spec.name = a.need("name");
    spec.scopes = a.all("scope");
    spec.requested_rpm = parse_u32(a.need("rate"), "--rate");
    if (auto t = a.opt("expires-at")) spec.expires_at = parse_time_arg(*t, "--expires-at", false);
    spec.quota = key_quota_arg(a).value_or(keyauth::Quota{});
    spec.allowed_ips = allow_ip_arg(a).value_or("");
    spec.meta = meta_arg(a).value_or("");
    size_t left = count ? parse_u32(*count, "--count") : 1;
    if (left < 1 || left > 10'000'000) throw UsageError("--count must be from 1 to 10000000");
    const keyauth::Actor actor = operator_actor();
    // read before the write: nothing may fail between a commit and its secret's printing
    const uint32_t ent = entitlement_of(store, account);
    if (!count) {
        auto made = store.create_keys(account, spec, 1, actor);
        std::string text;
        json j = with_secret(made.front(), ent, store.now(), text);
        print(a.as_json, j, text);
        return 0;
    }
    // Many keys go in batches (etcd takes 40 a write; LMDB a million, about
    // 1.2 GB of memory: fewer, larger transactions leave fewer free pages
    // behind, 379 bytes a key at 1M keys against 650 in batches of 50,000),
    // each printed as soon as it is committed: a secret exists nowhere else, so whatever fails later, every
    // key made is on the output, and millions of keys need no memory for
    // their output. --json streams one {"keys": [...]} document.
    constexpr size_t kMaxKeysPerTxn = 1'000'000;
    size_t made_total = 0;
    if (a.as_json) std::cout << "{\"keys\": [";
    auto close = [&] {
        if (a.as_json) std::cout << (made_total ? "\n]}\n" : "]}\n");
        std::cout.flush();
    };
    const size_t total = left;
    TerminalProgress progress;  // on a terminal only: scripts see the keys alone
    auto say = [&](size_t done, const char *doing) {
        progress.say("keyauthctl: " + std::to_string(done) + " of " + std::to_string(total) + " keys " +
                     doing + " (" + std::to_string(done * 100 / total) + "%)");
    };
    try {
        while (left > 0) {
            size_t batch = std::min({left, store.max_keys_per_write(), kMaxKeysPerTxn});
            const size_t before = made_total;
            auto made = store.create_keys(account, spec, batch, actor, [&](size_t n) {
                say(before + n, n < batch ? "made" : "made, writing them");
            });
            left -= batch;
            say(before + batch, "committed");
            // each key written as it is formatted: no batch-sized buffer to fail on
            for (const auto &k : made) {
                std::string text;
                json j = with_secret(k, ent, store.now(), text);
                if (a.as_json) std::cout << (made_total ? ",\n" : "\n") << j.dump();
                else std::cout << text;
                made_total++;
            }
            std::cout.flush();
            if (!std::cout) throw std::runtime_error("cannot write the new keys' secrets to standard output");
        }
    } catch (...) {
        close();
        if (made_total > 0)
            std::cerr << "keyauthctl: " << made_total << " keys were created (printed above) before this error\n";
        throw;
    }
    close();
    if (!std::cout) throw std::runtime_error("cannot write the new keys' secrets to standard output");
    return 0;
}

int key_list(keyauth::Store &store, const Args &a) {
    Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
    auto limit = a.opt("limit");
    auto cursor = a.opt("cursor");
    std::optional<Id> after;
    if (cursor) after = parse_id_arg(keyauth::kKeyIdPrefix, *cursor, "--cursor");
    auto page = store.list_keys(account, limit ? parse_u32(*limit, "--limit") : keyauth::Store::kMaxPageSize,
                                after);
    uint32_t ent = entitlement_of(store, account);
    json arr = json::array();
    std::string text;
    const auto leaks = store.key_leaks(account);
    for (const auto &k : page.keys) {
        const int64_t now = store.now();
        arr.push_back(keyauth::key_to_json(k, ent, now, key_quota_used(k, now)));
        keyauth::set_leak(arr.back(), leaks, k.key_id);
        text += key_line(arr.back());
    }
    json next = page.next ? json(keyauth::id_to_string(keyauth::kKeyIdPrefix, *page.next)) : json(nullptr);
    if (page.next) text += "more: --cursor " + next.get<std::string>() + "\n";
    print(a.as_json, json{{"keys", arr}, {"nextCursor", next}}, text);
    return 0;
}

// As the console reads it: with --account, another account's key is "no key".
int key_show(keyauth::Store &store, const Args &a) {
    Id id = key_arg(a);
    auto owner = owner_arg(a);
    auto key = store.find_key(id);
    if (!key || (owner && key->account_id != *owner))
        throw keyauth::StoreError(keyauth::StoreError::Kind::kNotFound, "id",
                                  "no key " + keyauth::id_to_string(keyauth::kKeyIdPrefix, id));
    json j = key_json(store, *key);
    std::string expires = j["expiresAt"].is_null() ? "never" : j["expiresAt"].get<std::string>();
    std::string text = key_line(j) + "  account " + keyauth::id_to_string(keyauth::kAccountIdPrefix, key->account_id) +
                       "\n  created " + j["createdAt"].get<std::string>() + ", expires " + expires + "\n";
    for (const char *field : {"revokedAt", "rolledFrom", "rolledTo"})
        if (!j[field].is_null()) text += std::string("  ") + field + " " + j[field].get<std::string>() + "\n";
    print(a.as_json, j, text);
    return 0;
}

int key_update(keyauth::Store &store, const Args &a) {
    Id id = key_arg(a);
    auto owner = owner_arg(a);
    keyauth::KeyChanges changes;
    changes.name = a.opt("name");
    if (a.has("scope")) changes.scopes = a.all("scope");
    if (auto rate = a.opt("rate")) changes.requested_rpm = parse_u32(*rate, "--rate");
    if (auto t = a.opt("expires-at")) changes.expires_at = parse_time_arg(*t, "--expires-at", true);
    changes.quota = key_quota_arg(a);
    changes.allowed_ips = allow_ip_arg(a);
    changes.meta = meta_arg(a);
    if (changes.empty())
        throw UsageError(
            "key update needs something to change: --name, --scope, --rate, --expires-at, --quota, --allow-ip or --meta");
    auto rec = store.update_key(owner, id, changes, operator_actor());
    json j = key_json(store, rec);
    print(a.as_json, j, "key " + j["id"].get<std::string>() + " updated\n" + key_line(j));
    return 0;
}

int key_roll(keyauth::Store &store, const Args &a) {
    Id id = key_arg(a);
    auto owner = owner_arg(a);
    auto rolled = store.roll_key(owner, id, grace_arg(a), operator_actor());
    std::string text;
    json j = with_secret(rolled.successor, entitlement_of(store, rolled.successor.key.account_id), store.now(),
                         text);
    json old = key_json(store, rolled.predecessor);
    j["predecessor"] = old;
    text += "key " + old["id"].get<std::string>() +
            (old["status"] == "revoked" ? " revoked now\n" : " stops at " + old["expiresAt"].get<std::string>() + "\n");
    print(a.as_json, j, text);
    return 0;
}

// The secret on standard input (one line; never an argument, which every
// local user could read in the process list), then the one report step
// behind GitHub's and the admin API's reports.
int key_report_leak(keyauth::Store &store, const Args &a) {
    if (!a.has("secret-stdin"))
        throw UsageError("key report-leak reads the secret from standard input: give --secret-stdin");
    std::string secret;
    char c;
    while (std::cin.get(c) && c != '\n') {
        if (secret.size() == 256) throw InputError("the secret on standard input is over 256 bytes: no key or token is");
        secret.push_back(c);
    }
    if (!secret.empty() && secret.back() == '\r') secret.pop_back();
    if (secret.empty()) throw InputError("no secret on standard input");
    keyauth::LeakReportOrigin origin{a.opt("source").value_or("keyauthctl"), a.opt("url").value_or("")};
    const auto action = a.has("notify") ? keyauth::LeakAction::kNotify : keyauth::LeakAction::kRevoke;
    keyauth::ReportedSecret r = keyauth::report_secret(store, secret, "", action, origin, operator_actor());
    json j = keyauth::reported_secret_json(r);
    std::string text = !r.ours() ? "not a key or token of this deployment: nothing changed\n"
                       : !r.outcome.recorded ? r.token_type + " of this deployment, revoked or reported before: nothing changed\n"
                       : r.token_type + (r.outcome.revoked ? " revoked" : " recorded as leaked (not revoked)") +
                             (j["keyId"].is_null() ? "" : ": " + j["keyId"].get<std::string>()) + "\n";
    print(a.as_json, j, text);
    return 0;
}

int key_revoke(keyauth::Store &store, const Args &a) {
    auto rec = store.revoke_key(owner_arg(a), key_arg(a), operator_actor());
    json j = key_json(store, rec);
    print(a.as_json, j, "key " + j["id"].get<std::string>() + " revoked\n");
    return 0;
}

}  // namespace

int run_key(keyauth::Store &store, const Args &a) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") return key_create(store, a);
    if (verb == "list") return key_list(store, a);
    if (verb == "show") return key_show(store, a);
    if (verb == "update") return key_update(store, a);
    if (verb == "roll") return key_roll(store, a);
    if (verb == "revoke") return key_revoke(store, a);
    if (verb == "report-leak") return key_report_leak(store, a);
    throw UsageError("unknown key command \"" + verb + "\"");
}

}  // namespace keyauthctl
