// A model-based test of the key and account invariants (admin/lib/key_rules.h):
// random sequences of console calls (create, PATCH of every field, roll with
// and without grace, a roll chain counting once toward the cap, revoke), a
// quarter of them made through the admin API instead (the business's
// services: the same rules, reached by another door),
// operator changes (the cap, allowed scopes, allowedIps, meta, the plan,
// suspend, resume, token rotation) and time passing, run against the real
// Store, the real console API and the edge's own verdict and details
// (ka_edge_key_details: name, meta, account meta, plan id), and checked after
// every step against a small reference model written here, apart from the
// code it checks. Both backends: LMDB (the edge reads the store itself) and
// etcd (the edge reads a mirror rebuilt from etcd the way keyauth-syncd does).
//
// Seeded: KEYAUTH_MODEL_SEED=N replays one sequence (its steps printed with
// KEYAUTH_MODEL_VERBOSE=1); KEYAUTH_MODEL_SEQUENCES sets how many run.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "admin_api.h"
#include "client_sockaddr.h"
#include "console_fixture.h"
#include "ip_allowlist.h"
#include "keyauth_core.h"
#include "model_runner.h"
#include "model_store.h"
#include "restrictions.h"
#include "rfc3339.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::client_sockaddr;
using keyauth::testing::ModelStore;
using nlohmann::json;

namespace {

constexpr int64_t kStart = 1'800'000'000'000;  // 2027-01-15T08:00:00Z
constexpr int64_t kMaxAhead = 3652LL * 86400 * 1000;
const std::vector<std::string> kScopes = {"ip:read", "geo:read", "ip:*", "geo:write"};

// allowedIps: CIDRs as a caller may write them, and the canonical text each
// is stored as (two spellings of 10.0.0.0/8; an address alone is a /32).
struct PoolCidr {
    const char *sent;
    const char *canonical;
};
const std::vector<PoolCidr> kCidrs = {
    {"10.0.0.0/8", "10.0.0.0/8"},       {"::ffff:10.0.0.0/104", "10.0.0.0/8"},
    {"10.1.0.0/16", "10.1.0.0/16"},     {"192.0.2.0/24", "192.0.2.0/24"},
    {"2001:DB8:0::/32", "2001:db8::/32"}, {"2001:db8:1::/48", "2001:db8:1::/48"},
    {"198.51.100.7", "198.51.100.7/32"},
};
// Lists the API must refuse: host bits set, a prefix too long, not an
// address, none at all.
const std::vector<std::vector<std::string>> kBadIpLists = {
    {"10.1.2.3/8"}, {"10.0.0.0/33"}, {"2001:db8::1/32"}, {"10.0.0.0/8", "not-an-ip"}, {}};
// Client addresses and, written out by hand, the canonical CIDRs each fits.
// text nullptr: no address known (fits no list).
struct PoolClient {
    const char *text;
    std::set<std::string> fits;
};
const std::vector<PoolClient> kClients = {
    {"10.1.2.3", {"10.0.0.0/8", "10.1.0.0/16"}},
    {"10.2.0.1", {"10.0.0.0/8"}},
    {"192.0.2.200", {"192.0.2.0/24"}},
    {"198.51.100.7", {"198.51.100.7/32"}},
    {"198.51.100.8", {}},
    {"::ffff:10.1.2.3", {"10.0.0.0/8", "10.1.0.0/16"}},  // IPv4-mapped: an IPv4 client on an IPv6 socket
    {"::ffff:192.0.2.1", {"192.0.2.0/24"}},
    {"::a01:203", {}},  // IPv4-compatible ::10.1.2.3 is an IPv6 address, not 10.1.2.3
    {"2001:db8:1::5", {"2001:db8::/32", "2001:db8:1::/48"}},
    {"2001:db8:ffff::1", {"2001:db8::/32"}},
    {"2001:db9::1", {}},
    {nullptr, {}},
};
// meta: JSON objects as a caller may write them (spaced, members out of name
// order, a \u escape) and, written out by hand, the compact text each is
// kept as (members in name order); {} is a meta like any other; one is 1 KiB
// as kept, more as sent. null (none) is drawn apart.
struct PoolMeta {
    std::string sent;
    std::string kept;
};
const std::string kKiBFill(KA_META_MAX_BYTES - 8, 'm');  // {"p":"…"} of 1,024 bytes
const std::vector<PoolMeta> kMetas = {
    {R"({"tier":"gold"})", R"({"tier":"gold"})"},
    {R"({ "b" : 1, "a" : [1, -2, null] })", R"({"a":[1,-2,null],"b":1})"},
    {R"({"crm":"c-1","x":{"z":true,"y":"caf\u00e9"}})", "{\"crm\":\"c-1\",\"x\":{\"y\":\"caf\xc3\xa9\",\"z\":true}}"},
    {"{}", "{}"},
    {"{ \"p\" : \"" + kKiBFill + "\" }", "{\"p\":\"" + kKiBFill + "\"}"},
};
// Metas the API must refuse: not an object, or over 1 KiB as compact JSON.
const std::vector<std::string> kBadMetas = {"[1]", "\"gold\"", "7", "{\"p\":\"" + kKiBFill + "m\"}"};
// Key names: the longest is 200 bytes of UTF-8.
std::string repeated(const std::string &s, size_t n) {
    std::string out;
    for (size_t i = 0; i < n; i++) out += s;
    return out;
}
const std::vector<std::string> kNames = {"k", "renamed", repeated("\xc3\xa9", KA_NAME_MAX_LEN / 2)};
// Plans an account may be put on: they entitle nothing (its own values
// apply), so only the plan id tells; one id is of the longest.
const std::vector<std::string> kPlanIds = {"starter", std::string(KA_PLAN_ID_MAX_LEN, 'z')};

// An empty list fits any address (even none); otherwise one entry must fit.
bool ips_fit(const std::vector<std::string> &list, const PoolClient &client) {
    if (list.empty()) return true;
    for (const auto &c : list)
        if (client.fits.count(c)) return true;
    return false;
}

// ---- the reference model ---------------------------------------------------

struct MKey {
    std::string id;
    std::string secret;
    int account = 0;
    bool revoked = false;
    int64_t expires = 0;  // 0: never
    bool rolled = false;  // a predecessor: nothing makes it active again
    bool leak_told = false;  // reported leaked under notify (told once)
    std::string chain;    // its roll chain: the first key's id
    int from = -1;        // the index of the key it replaced, if any
    std::vector<std::string> scopes;
    std::string name = "k";
    int rate = 0;
    std::vector<std::string> ips;  // allowedIps, canonical; empty: any
    std::string meta;              // as kept; empty: none
    bool active(int64_t now) const { return !revoked && (expires == 0 || now < expires); }
};

struct MToken {
    std::string token;
    int64_t expires = 0;  // 0: current
};

struct MAccount {
    Id id{};
    bool suspended = false;
    uint32_t max_keys = 100;
    std::vector<std::string> allowed;  // empty: any
    std::vector<std::string> ips;      // allowedIps, canonical; empty: any
    std::string meta;                  // as kept; empty: none
    std::string plan;                  // plan id; empty: none
    std::vector<MToken> tokens;
    size_t audit_events = 0;
    // maxKeys was lowered below the active keys: they stay (grandfathered)
    // until they drop under it; no write may add to them meanwhile.
    bool over_cap_allowed = false;
};

bool grants(const std::string &have, const std::string &want) {
    if (have == want) return true;
    return have.size() > 2 && have.compare(have.size() - 2, 2, ":*") == 0 &&
           want.compare(0, have.size() - 1, have, 0, have.size() - 1) == 0;
}

bool allowed(const MAccount &a, const std::vector<std::string> &scopes) {
    if (a.allowed.empty()) return true;
    for (const auto &s : scopes) {
        bool ok = false;
        for (const auto &g : a.allowed) ok = ok || grants(g, s);
        if (!ok) return false;
    }
    return true;
}

// What a call is expected to answer: a status and, for errors, the code.
struct Expect {
    int status = 200;
    std::string code;
};

Expect ok(int status = 200) { return {status, ""}; }
Expect err(int status, const char *code) { return {status, code}; }

// ---- the harness -----------------------------------------------------------

class Harness {
public:
    Harness(Backend kind, uint64_t seed) : rng_(seed), world_(kind, std::to_string(seed)) {
        store_ = &world_.store();
        store_->set_clock([this] { return now_; });
        api_ = std::make_unique<ConsoleApi>(*store_);
        admin_api_ = std::make_unique<AdminApi>(*store_);
        admin_token_ = store_->create_admin_token("model", kAllAdminScopes, std::nullopt).secret;
        std::vector<PlanRecord> plans;
        for (size_t i = 0; i < kPlanIds.size(); i++) {
            PlanRecord p;
            p.id = kPlanIds[i];
            p.name = "plan " + std::to_string(i);
            p.price_paise = 100;
            p.features = {"f"};
            p.popular = i == 0;
            p.sort_order = int32_t(i);
            plans.push_back(p);
        }
        store_->import_plans(plans);
        for (int i = 0; i < 2; i++) {
            MAccount a;
            a.max_keys = 1 + rng_() % 3;
            AccountChanges c;
            c.max_keys = a.max_keys;
            CreatedAccount made = store_->create_account("acct" + std::to_string(i), 600, c);
            a.id = made.account.id;
            a.tokens.push_back({made.console_token, 0});
            a.audit_events = 1;
            accounts_.push_back(a);
        }
        edge_ = world_.edge();
        for (const PoolClient &c : kClients) client_addrs_.push_back(c.text ? client_sockaddr(c.text) : sockaddr_storage{});
    }

    // Runs `steps` random steps, checking after each; false at the first
    // disagreement, described in failure().
    bool run(int steps) {
        for (int i = 0; i < steps && failure_.empty(); i++) {
            step_ = i;
            random_step();
            if (failure_.empty()) check_all();
        }
        return failure_.empty();
    }
    const std::string &failure() const { return failure_; }
    const std::string &log() const { return log_; }

private:
    void note(const std::string &s) {
        log_ += "  step " + std::to_string(step_) + " @" + std::to_string(now_ - kStart) + "ms: " + s + "\n";
    }
    void fail(const std::string &s) {
        if (failure_.empty()) failure_ = "step " + std::to_string(step_) + ": " + s;
    }

    size_t pick(size_t n) { return rng_() % n; }
    bool chance(int percent) { return int(rng_() % 100) < percent; }

    std::vector<std::string> random_scopes() {
        std::vector<std::string> out;
        std::set<std::string> seen;
        size_t n = 1 + pick(2);
        while (out.size() < n) {
            const std::string &s = kScopes[pick(kScopes.size())];
            if (seen.insert(s).second) out.push_back(s);
        }
        return out;
    }

    // An expiry to send, and what the model reads it as: never, a time, or
    // one the API must refuse (the epoch, the past, too far ahead).
    struct SentExpiry {
        json value;
        std::optional<int64_t> at;  // nullopt: null (never)
    };
    SentExpiry random_expiry() {
        switch (pick(8)) {
        case 0: return {nullptr, std::nullopt};
        case 1: return {"1970-01-01T00:00:00Z", 0};
        case 2: {  // in the past; the model must know the very instant sent: it may
                   // be an expired key's own expiry, which is then no change at all
            const int64_t at = now_ - 1 - int64_t(pick(5000));
            return {format_time(at), at};
        }
        case 3: return {format_time(now_), now_};
        case 4: return {format_time(now_ + kMaxAhead + 1000), now_ + kMaxAhead + 1000};
        default: {
            int64_t at = now_ + 1 + int64_t(pick(8000));
            return {format_time(at), at};
        }
        }
    }
    // An allowedIps value to send, and what the model reads it as: null
    // (any address), a list (its canonical entries, duplicates dropped,
    // order kept), or one the API must refuse.
    struct SentIps {
        json value;
        bool valid = true;
        std::vector<std::string> canonical;
        std::vector<std::string> sent;  // for update_account
    };
    SentIps random_ips(bool may_be_bad) {
        SentIps out;
        const size_t kind = pick(10);
        if (kind < 3) return {nullptr, true, {}, {}};
        if (kind == 3 && may_be_bad) {
            out.sent = kBadIpLists[pick(kBadIpLists.size())];
            out.value = out.sent;
            out.valid = false;
            return out;
        }
        const size_t n = 1 + pick(3);
        for (size_t i = 0; i < n; i++) {
            const PoolCidr &c = kCidrs[pick(kCidrs.size())];
            out.sent.push_back(c.sent);
            if (std::find(out.canonical.begin(), out.canonical.end(), c.canonical) == out.canonical.end())
                out.canonical.push_back(c.canonical);
        }
        out.value = out.sent;
        return out;
    }

    // A meta to send, as JSON text, and what the model reads it as: null
    // (none), an object (its text as kept), or one the API must refuse.
    struct SentMeta {
        std::string text;
        bool valid = true;
        std::string kept;  // empty: none
    };
    SentMeta random_meta(bool may_be_bad) {
        const size_t kind = pick(10);
        if (kind < 3) return {"null", true, ""};
        if (kind == 3 && may_be_bad) return {kBadMetas[pick(kBadMetas.size())], false, ""};
        const PoolMeta &m = kMetas[pick(kMetas.size())];
        return {m.sent, true, m.kept};
    }
    // A body's text with its meta spelled exactly as sent (a json value
    // would be spelled again, compact and in name order).
    static std::string body_text(const json &body, const std::optional<SentMeta> &meta) {
        if (body.is_null()) return "";
        std::string text = body.dump();
        if (!meta) return text;
        text.pop_back();  // the closing brace
        return text + (text.size() > 1 ? "," : "") + "\"meta\":" + meta->text + "}";
    }

    // The model's reading of a time that went through format_time (ms).
    static int64_t parsed_ms(const json &v) { return *parse_time(v.get<std::string>()); }

    // ---- calls ----
    HttpResponse console(int acc, const std::string &method, const std::string &path, const json &body,
                         const MToken **used, const std::optional<SentMeta> &meta = std::nullopt) {
        auto &tokens = accounts_[acc].tokens;
        // mostly the newest token; now and then an older one, maybe stopped
        const MToken &t = chance(85) ? tokens.back() : tokens[pick(tokens.size())];
        *used = &t;
        HttpRequest r;
        r.method = method;
        r.path = path;
        r.has_authorization = true;
        r.authorization = "Bearer " + t.token;
        r.content_type = "application/json";
        r.client_address = "203.0.113.7";
        r.body = body_text(body, meta);
        // The admin API reaches every account with one token, so where the
        // console would refuse the caller (a stopped token, a suspended
        // account, another account's key) it is not asked: it has no such
        // refusal to compare. Otherwise it must answer as the console does.
        if (chance(25) && !login(acc, t) && owns_path(acc, path)) {
            r.path = path == "/v1/keys" ? "/v1/admin/accounts/" + id_to_string(kAccountIdPrefix, accounts_[acc].id) + "/keys"
                                        : "/v1/admin" + path.substr(3);  // /v1/keys/.. -> /v1/admin/keys/..
            r.authorization = "Bearer " + admin_token_;
            note("(through the admin API)");
            return admin_api_->handle(r);
        }
        return api_->handle(r);
    }
    // Whether the path is the account's: its own key, or its key list.
    bool owns_path(int acc, const std::string &path) const {
        if (path == "/v1/keys") return true;
        for (const MKey &k : keys_)
            if (path.compare(0, 9 + k.id.size(), "/v1/keys/" + k.id) == 0) return k.account == acc;
        return false;
    }
    // Whether the console lets the caller in at all.
    std::optional<Expect> login(int acc, const MToken &t) {
        if (t.expires != 0 && now_ >= t.expires) return err(401, "INVALID_CONSOLE_TOKEN");
        if (accounts_[acc].suspended) return err(403, "ACCOUNT_SUSPENDED");
        return std::nullopt;
    }
    bool compare(const std::string &what, const HttpResponse &r, const Expect &e) {
        std::string code;
        if (r.status >= 400) {
            try {
                code = json::parse(r.body)["error"]["code"].get<std::string>();
            } catch (...) {
                code = "?";
            }
        }
        note(what + " -> " + std::to_string(r.status) + " " + code + " (model: " + std::to_string(e.status) +
             " " + e.code + ")");
        if (r.status != e.status || code != e.code) {
            fail(what + ": got " + std::to_string(r.status) + " " + code + ", the model says " +
                 std::to_string(e.status) + " " + e.code + "; body " + r.body);
            return false;
        }
        return true;
    }

    // What counts toward maxKeys: the roll chains with an active key (a
    // predecessor in its grace and its successor are one key).
    std::set<std::string> active_chains(int acc) const {
        std::set<std::string> chains;
        for (const auto &k : keys_)
            if (k.account == acc && k.active(now_)) chains.insert(k.chain);
        return chains;
    }
    int active_keys(int acc) const { return int(active_chains(acc).size()); }
    // After a write that can only lower the active count, or lowers the cap.
    void settle_cap(int acc) {
        MAccount &a = accounts_[acc];
        if (active_keys(acc) <= int(a.max_keys)) a.over_cap_allowed = false;
    }
    bool owned(const MKey &k, int acc) const { return k.account == acc; }

    void random_step() {
        const size_t what = pick(100);
        if (what < 22) return create_key();
        if (what < 46) return patch_key();
        if (what < 60) return roll_key();
        if (what < 66) return revoke_key();
        if (what < 82) return pass_time();
        if (what < 90) return change_account();
        if (what < 96) return suspend_or_resume();
        if (what < 98) return report_leak();
        return rotate_token();
    }

    void create_key() {
        const int acc = int(pick(accounts_.size()));
        MAccount &a = accounts_[acc];
        json body = {{"name", "k"}, {"scopes", random_scopes()}, {"rateLimitPerMinute", 1 + int(pick(100))}};
        std::optional<SentExpiry> exp;
        if (chance(50)) {
            exp = random_expiry();
            body["expiresAt"] = exp->value;
        }
        std::optional<SentIps> ips;
        if (chance(40)) {
            ips = random_ips(true);
            body["allowedIps"] = ips->value;
        }
        std::optional<SentMeta> meta;
        if (chance(40)) meta = random_meta(true);
        const MToken *t = nullptr;
        HttpResponse r = console(acc, "POST", "/v1/keys", body, &t, meta);
        Expect e = ok(201);
        const auto scopes = body["scopes"].get<std::vector<std::string>>();
        if (auto denied = login(acc, *t)) e = *denied;
        else if ((ips && !ips->valid) || (meta && !meta->valid)) e = err(400, "VALIDATION_ERROR");
        else if (exp && (!exp->at || *exp->at <= now_ || *exp->at - now_ > kMaxAhead)) e = err(400, "VALIDATION_ERROR");
        else if (!allowed(a, scopes)) e = err(403, "SCOPE_NOT_ALLOWED");
        else if (active_keys(acc) + 1 > int(a.max_keys)) e = err(409, "KEY_LIMIT_REACHED");
        if (!compare("create " + body_text(body, meta), r, e) || r.status != 201) return;
        json k = json::parse(r.body);
        MKey m;
        m.id = k["id"];
        m.chain = m.id;
        m.secret = k["secret"];
        m.account = acc;
        m.scopes = scopes;
        m.expires = exp ? *exp->at : 0;
        m.rate = body["rateLimitPerMinute"];
        if (ips) m.ips = ips->canonical;
        if (meta) m.meta = meta->kept;
        keys_.push_back(m);
        a.audit_events++;
    }

    // A key to act on: mostly one of the caller's, sometimes another's.
    MKey *random_key() {
        if (keys_.empty()) return nullptr;
        return &keys_[pick(keys_.size())];
    }

    void patch_key() {
        MKey *k = random_key();
        if (!k) return create_key();
        const int acc = chance(85) ? k->account : 1 - k->account;
        MAccount &a = accounts_[acc];
        json body = json::object();
        std::optional<SentExpiry> exp;
        std::optional<SentIps> ips;
        std::optional<SentMeta> meta;
        while (body.empty() && !meta) {
            if (chance(30)) body["name"] = kNames[pick(kNames.size())];
            if (chance(35)) body["scopes"] = chance(30) ? k->scopes : random_scopes();
            if (chance(25)) body["rateLimitPerMinute"] = 1 + int(pick(100));
            if (chance(55)) {
                exp = random_expiry();
                if (chance(15)) exp = SentExpiry{k->expires ? json(format_time(k->expires)) : json(nullptr),
                                                 k->expires ? std::optional<int64_t>(k->expires) : std::nullopt};
                body["expiresAt"] = exp->value;
            }
            if (chance(25)) {
                ips = random_ips(true);
                if (chance(15)) ips = SentIps{k->ips.empty() ? json(nullptr) : json(k->ips), true, k->ips, {}};
                body["allowedIps"] = ips->value;
            }
            if (chance(20)) {
                meta = random_meta(true);
                if (chance(15)) meta = SentMeta{k->meta.empty() ? "null" : k->meta, true, k->meta};  // as it is
            }
        }
        const MToken *t = nullptr;
        HttpResponse r = console(acc, "PATCH", "/v1/keys/" + k->id, body, &t, meta);

        // the model: the same order of checks as documented in store.h
        MKey after = *k;
        bool changed = false;
        Expect e = ok();
        const auto scopes = body.contains("scopes") ? body["scopes"].get<std::vector<std::string>>() : k->scopes;
        // the epoch is an instant (in the past), never "never": compared as optionals
        const bool exp_changes = exp && (exp->at ? k->expires == 0 || *exp->at != k->expires : k->expires != 0);
        const int64_t new_exp = exp_changes ? exp->at.value_or(0) : k->expires;
        if (auto denied = login(acc, *t)) e = *denied;
        else if ((ips && !ips->valid) || (meta && !meta->valid)) e = err(400, "VALIDATION_ERROR");  // read with the body
        else if (!owned(*k, acc)) e = err(404, "KEY_NOT_FOUND");
        else if (k->revoked) e = err(409, "KEY_REVOKED");
        else if (exp_changes && exp->at && (*exp->at <= now_ || *exp->at - now_ > kMaxAhead)) e = err(400, "VALIDATION_ERROR");
        else if (exp_changes && k->rolled) e = err(409, "KEY_ALREADY_ROLLED");
        else if (body.contains("scopes") && scopes != k->scopes && !allowed(a, scopes)) e = err(403, "SCOPE_NOT_ALLOWED");
        else {
            after.expires = new_exp;
            after.scopes = scopes;
            if (body.contains("name")) after.name = body["name"];
            if (body.contains("rateLimitPerMinute")) after.rate = body["rateLimitPerMinute"];
            if (ips) after.ips = ips->canonical;
            if (meta) after.meta = meta->kept;
            changed = exp_changes || scopes != k->scopes || after.name != k->name || after.rate != k->rate ||
                      after.ips != k->ips || after.meta != k->meta;
            if (changed && !k->active(now_) && after.active(now_)) {
                // a key made active again counts like a new one, unless its
                // chain is active already (its predecessor in grace)
                const auto chains = active_chains(acc);
                const size_t adds = chains.count(k->chain) ? 0 : 1;
                if (!allowed(a, scopes)) e = err(403, "SCOPE_NOT_ALLOWED");
                else if (chains.size() + adds > a.max_keys) e = err(409, "KEY_LIMIT_REACHED");
            }
        }
        if (!compare("patch " + short_id(*k) + " " + body_text(body, meta), r, e) || r.status != 200) return;
        if (changed) {
            *k = after;
            a.audit_events++;
        }
    }
    static Id parse_key_id(const std::string &text) {
        Id id{};
        parse_id(kKeyIdPrefix, text, id);
        return id;
    }
    static std::string short_id(const MKey &k) { return k.id.substr(k.id.size() - 6); }

    void roll_key() {
        MKey *k = random_key();
        if (!k) return create_key();
        const int acc = chance(90) ? k->account : 1 - k->account;
        MAccount &a = accounts_[acc];
        int64_t grace = chance(40) ? 0 : 1 + int64_t(pick(10));
        if (chance(5)) grace = chance(50) ? -1 : 604801;
        json body = {{"gracePeriodSeconds", grace}};
        const MToken *t = nullptr;
        const size_t index = size_t(k - keys_.data());
        HttpResponse r = console(acc, "POST", "/v1/keys/" + k->id + "/roll", body, &t);
        Expect e = ok(201);
        if (auto denied = login(acc, *t)) e = *denied;
        else if (grace < 0 || grace > 604800) e = err(400, "VALIDATION_ERROR");
        else if (!owned(*k, acc)) e = err(404, "KEY_NOT_FOUND");
        else if (k->revoked) e = err(409, "KEY_REVOKED");
        else if (k->rolled) e = err(409, "KEY_ALREADY_ROLLED");
        else if (!k->active(now_)) e = err(409, "KEY_EXPIRED");
        else if (!allowed(a, k->scopes)) e = err(403, "SCOPE_NOT_ALLOWED");
        // the successor joins the chain of an active key: a roll adds no key,
        // with or without grace, but the account must be within its cap
        else if (active_keys(acc) > int(a.max_keys)) e = err(409, "KEY_LIMIT_REACHED");
        if (!compare("roll " + short_id(*k) + " grace " + std::to_string(grace), r, e) || r.status != 201) return;
        json made = json::parse(r.body);
        MKey next;
        next.id = made["id"];
        next.chain = k->chain;
        next.from = int(index);
        next.secret = made["secret"];
        next.account = k->account;
        next.scopes = k->scopes;
        next.expires = k->expires;
        next.name = k->name;
        next.rate = k->rate;
        next.ips = k->ips;  // the successor may be used from where its predecessor could
        next.meta = k->meta;  // and tells what it told
        MKey &old = keys_[index];
        // at most two live secrets a chain: the older predecessor's grace ends now
        if (old.from >= 0) {
            MKey &older = keys_[size_t(old.from)];
            if (older.active(now_)) {
                older.expires = grace_end_[older.id] = now_;
                note("  ... the grace of " + short_id(older) + " ends now");
            }
        }
        old.rolled = true;
        if (grace == 0) old.revoked = true;
        else {
            const int64_t end = now_ + grace * 1000;
            old.expires = old.expires ? std::min(old.expires, end) : end;
        }
        grace_end_[old.id] = old.revoked ? now_ : old.expires;
        keys_.push_back(next);
        a.audit_events++;
    }
    std::map<std::string, int64_t> grace_end_;

    void revoke_key() {
        MKey *k = random_key();
        if (!k) return create_key();
        const int acc = chance(90) ? k->account : 1 - k->account;
        const MToken *t = nullptr;
        HttpResponse r = console(acc, "POST", "/v1/keys/" + k->id + "/revoke", nullptr, &t);
        Expect e = ok();
        if (auto denied = login(acc, *t)) e = *denied;
        else if (!owned(*k, acc)) e = err(404, "KEY_NOT_FOUND");
        if (!compare("revoke " + short_id(*k), r, e) || r.status != 200) return;
        if (!k->revoked) {
            k->revoked = true;
            accounts_[acc].audit_events++;
            settle_cap(acc);
        }
    }

    // A secret scanner's report (issue 47): revoke stops the key as a
    // revoke does (and is audited twice: key.revoke and key.leak); notify
    // tells once and leaves it live; a revoked key changes nothing.
    void report_leak() {
        MKey *k = random_key();
        if (!k) return create_key();
        const bool revoke = chance(70);
        const LeakOutcome out =
            store_->report_leak(k->secret, revoke ? LeakAction::kRevoke : LeakAction::kNotify,
                                {"github", "https://github.com/o/r"}, Actor::secret_scanning("github", "192.0.2.1"));
        size_t events = 0;
        if (!k->revoked && revoke) {
            k->revoked = true;
            events = 2;
            settle_cap(k->account);
        } else if (!k->revoked && !k->leak_told) {
            k->leak_told = true;
            events = 1;
        }
        accounts_[k->account].audit_events += events;
        note(std::string("report leak of ") + short_id(*k) + (revoke ? " (revoke)" : " (notify)") + " -> recorded " +
             std::to_string(out.recorded) + ", revoked " + std::to_string(out.revoked));
        if (out.kind != LeakedSecret::kKey || out.recorded != (events > 0) || out.revoked != (events == 2))
            fail("report_leak of " + short_id(*k) + ": recorded " + std::to_string(out.recorded) + ", revoked " +
                 std::to_string(out.revoked) + "; the model says " + std::to_string(events) + " events");
    }

    void pass_time() {
        int64_t step;
        // now and then land exactly on a key's expiry, or just before it
        if (chance(40) && !keys_.empty()) {
            const MKey &k = keys_[pick(keys_.size())];
            if (k.expires > now_) {
                step = k.expires - now_ - (chance(50) ? 1 : 0);
                if (step <= 0) step = 1;
            } else {
                step = 1 + int64_t(pick(3000));
            }
        } else {
            step = chance(90) ? 1 + int64_t(pick(4000)) : int64_t(3600) * 1000;
        }
        now_ += step;
        note("time +" + std::to_string(step) + "ms");
        for (size_t i = 0; i < accounts_.size(); i++) settle_cap(int(i));
    }

    void change_account() {
        const int acc = int(pick(accounts_.size()));
        MAccount &a = accounts_[acc];
        AccountChanges c;
        std::optional<SentIps> ips;
        std::optional<SentMeta> meta;
        std::optional<std::string> plan;  // empty: none
        const size_t which = pick(14);
        if (which < 4) c.max_keys = 1 + uint32_t(pick(4));
        else if (which < 7) c.allowed_scopes = chance(30) ? std::vector<std::string>{} : random_scopes();
        else if (which < 10) {
            ips = random_ips(false);
            c.allowed_ips = ips->value.is_null() ? "" : allowed_ips_from_texts(ips->sent, "allowedIps");
        } else if (which < 12) {
            meta = random_meta(false);
            c.meta = meta_from_json(json::parse(meta->text), "meta");
        } else {
            plan = chance(30) ? "" : kPlanIds[pick(kPlanIds.size())];
        }
        if (plan) store_->set_plan(a.id, plan->empty() ? std::nullopt : plan);
        else store_->update_account(a.id, c);
        note("account " + std::to_string(acc) +
             (c.max_keys         ? " maxKeys " + std::to_string(*c.max_keys)
              : c.allowed_scopes ? " allowedScopes " + json(*c.allowed_scopes).dump()
              : ips              ? " allowedIps " + ips->value.dump()
              : meta             ? " meta " + meta->text
                                 : " plan \"" + *plan + "\""));
        bool changed = false;
        if (meta && meta->kept != a.meta) {
            a.meta = meta->kept;
            changed = true;
        }
        if (plan && *plan != a.plan) {
            a.plan = *plan;
            changed = true;
        }
        if (ips && ips->canonical != a.ips) {
            a.ips = ips->canonical;
            changed = true;
        }
        if (c.max_keys && *c.max_keys != a.max_keys) {
            a.max_keys = *c.max_keys;
            changed = true;
            if (active_keys(acc) > int(a.max_keys)) a.over_cap_allowed = true;
            settle_cap(acc);
        }
        if (c.allowed_scopes && *c.allowed_scopes != a.allowed) {
            a.allowed = *c.allowed_scopes;
            changed = true;
        }
        if (changed) a.audit_events++;
    }

    void suspend_or_resume() {
        // a suspended account is resumed first: suspensions stay short
        int acc = int(pick(accounts_.size()));
        for (size_t i = 0; i < accounts_.size(); i++)
            if (accounts_[i].suspended && chance(80)) acc = int(i);
        MAccount &a = accounts_[acc];
        const bool suspend = !a.suspended;
        Expect e = ok();
        if (!suspend) {
            bool scopes_ok = true;
            for (const auto &k : keys_)
                if (k.account == acc && k.active(now_)) scopes_ok = scopes_ok && allowed(a, k.scopes);
            if (!scopes_ok) e = err(403, "SCOPE_NOT_ALLOWED");
            else if (active_keys(acc) > int(a.max_keys)) e = err(409, "KEY_LIMIT_REACHED");
        }
        HttpResponse r;
        try {
            store_->set_suspended(a.id, suspend);
            r.status = 200;
        } catch (const StoreError &x) {
            r.status = x.kind() == StoreError::Kind::kConflict ? 409 : x.kind() == StoreError::Kind::kForbidden ? 403 : 500;
            r.body = json{{"error", {{"code", x.code()}, {"message", x.what()}}}}.dump();
        }
        if (!compare(std::string(suspend ? "suspend " : "resume ") + std::to_string(acc), r, e) || r.status != 200)
            return;
        a.suspended = suspend;
        a.audit_events++;
        if (!suspend) a.over_cap_allowed = false;
    }

    void rotate_token() {
        const int acc = int(pick(accounts_.size()));
        MAccount &a = accounts_[acc];
        const int64_t grace = chance(50) ? 0 : 1 + int64_t(pick(5));
        CreatedAccount made = store_->rotate_console_token(a.id, grace);
        note("rotate token " + std::to_string(acc) + " grace " + std::to_string(grace));
        // every token stays in the model (callers may still try an old one)
        std::vector<MToken> kept;
        for (MToken t : a.tokens) {
            if (grace == 0) {
                if (t.expires == 0 || t.expires > now_) t.expires = now_;  // stopped now
            } else if (t.expires == 0) {
                t.expires = now_ + grace * 1000;
            }
            kept.push_back(t);
        }
        kept.push_back({made.console_token, 0});
        a.tokens = kept;
        a.audit_events++;
    }

    // ---- the checks after every step ----
    void check_all() {
        edge_ = world_.edge();
        std::vector<std::set<std::string>> active(accounts_.size());
        std::map<std::string, int> live_in_chain;
        for (const MKey &k : keys_) {
            auto rec = store_->find_key(parse_key_id(k.id));
            if (!rec) return fail("key " + k.id + " is missing from the store");
            const bool revoked = rec->status == KA_KEY_REVOKED;
            if (revoked != k.revoked) return fail("key " + short_id(k) + " revoked " + std::to_string(revoked) +
                                                  ", the model says " + std::to_string(k.revoked));
            if (!k.revoked && rec->expires_ms != k.expires)
                return fail("key " + short_id(k) + " expires at " + std::to_string(rec->expires_ms - kStart) +
                            ", the model says " + std::to_string(k.expires - kStart));
            if (is_none(rec->rolled_to) == k.rolled) return fail("key " + short_id(k) + " rolled flag differs");
            if (rec->scopes != k.scopes) return fail("key " + short_id(k) + " scopes differ");
            if (allowed_ips_text(rec->allowed_ips) != k.ips)
                return fail("key " + short_id(k) + " allowedIps " + json(allowed_ips_text(rec->allowed_ips)).dump() +
                            ", the model says " + json(k.ips).dump());
            if (rec->meta != k.meta)
                return fail("key " + short_id(k) + " meta " + rec->meta + ", the model says " + k.meta);
            // a rolled predecessor is never active after its grace
            if (k.rolled && !revoked && (rec->expires_ms == 0 || rec->expires_ms > grace_end_[k.id]))
                return fail("rolled key " + short_id(k) + " lives past its grace");
            const bool live = !revoked && (rec->expires_ms == 0 || now_ < rec->expires_ms);
            if (live) active[size_t(k.account)].insert(k.chain);
            if (live && ++live_in_chain[k.chain] > 2)
                return fail("the chain of key " + short_id(k) + " has more than two live secrets");

            // the edge's verdict, from two client addresses (or none)
            const MAccount &a = accounts_[size_t(k.account)];
            for (int i = 0; i < 2; i++) {
                const size_t c = pick(kClients.size());
                const PoolClient &client = kClients[c];
                int want = !k.active(now_) ? KA_AUTH_KEY_INVALID
                           : a.suspended   ? KA_AUTH_ACCOUNT_SUSPENDED
                           : !ips_fit(k.ips, client) || !ips_fit(a.ips, client) ? KA_AUTH_IP_NOT_ALLOWED
                                                                                 : KA_AUTH_OK;
                const std::string header = "Bearer " + k.secret;
                const sockaddr *addr = client.text ? reinterpret_cast<const sockaddr *>(&client_addrs_[c]) : nullptr;
                ka_auth_result_t res;
                ka_edge_authenticate(edge_, header.data(), header.size(), addr, nullptr, 0, now_, &res);
                if (res.verdict != want)
                    return fail("the edge says " + std::to_string(res.verdict) + " for key " + short_id(k) +
                                " from " + (client.text ? client.text : "no address") + ", the model " +
                                std::to_string(want) + " (key allowedIps " + json(k.ips).dump() + ", account's " +
                                json(a.ips).dump() + ")");
                if (res.verdict == KA_AUTH_OK) check_details(k, res);
                if (!failure_.empty()) return;
            }
        }
        for (size_t i = 0; i < accounts_.size(); i++) {
            const MAccount &a = accounts_[i];
            if (active[i].size() > a.max_keys && !a.over_cap_allowed)
                return fail("account " + std::to_string(i) + " has " + std::to_string(active[i].size()) +
                            " active keys (roll chains) over its maxKeys " + std::to_string(a.max_keys));
            const size_t events = store_->list_audit(a.id, Store::kMaxPageSize, std::nullopt).events.size();
            const auto acc = store_->find_account(a.id);
            if (!acc || allowed_ips_text(acc->record.allowed_ips) != a.ips)
                return fail("account " + std::to_string(i) + " allowedIps differ from the model's " + json(a.ips).dump());
            if (acc->record.meta != a.meta || acc->record.plan_id != a.plan)
                return fail("account " + std::to_string(i) + " meta " + acc->record.meta + ", plan \"" +
                            acc->record.plan_id + "\"; the model says " + a.meta + ", \"" + a.plan + "\"");
            if (events != a.audit_events)
                return fail("account " + std::to_string(i) + " has " + std::to_string(events) +
                            " audit events, the model " + std::to_string(a.audit_events));
        }
        // the console's reading of one key agrees (status active/expired/revoked)
        if (!keys_.empty()) {
            const MKey &k = keys_[pick(keys_.size())];
            const MAccount &a = accounts_[size_t(k.account)];
            const MToken *t = nullptr;
            HttpResponse r = console(k.account, "GET", "/v1/keys/" + k.id, nullptr, &t);
            if (login(k.account, *t)) return;
            (void)a;
            const char *want = k.revoked ? "revoked" : k.active(now_) ? "active" : "expired";
            if (r.status != 200 || json::parse(r.body)["status"] != want)
                return fail("GET " + short_id(k) + ": " + std::to_string(r.status) + " " + r.body + ", the model says " + want);
            const json want_ips = k.ips.empty() ? json(nullptr) : json(k.ips);
            if (json::parse(r.body)["allowedIps"] != want_ips)
                return fail("GET " + short_id(k) + ": allowedIps " + json::parse(r.body)["allowedIps"].dump() +
                            ", the model says " + want_ips.dump());
            const json want_meta = k.meta.empty() ? json(nullptr) : json::parse(k.meta);
            if (json::parse(r.body)["meta"] != want_meta)
                return fail("GET " + short_id(k) + ": meta " + json::parse(r.body)["meta"].dump() +
                            ", the model says " + want_meta.dump());
        }
    }

    // What the edge tells of a key it accepted, read afresh from the store:
    // the model's name and meta of the key, its account's meta and plan id.
    void check_details(const MKey &k, const ka_auth_result_t &res) {
        const MAccount &a = accounts_[size_t(k.account)];
        ka_key_details_t d;
        if (ka_edge_key_details(edge_, &res, details_, sizeof details_, &d) != 1)
            return fail("the edge has no details of key " + short_id(k) + ", which it accepted");
        auto text = [](ka_str_t s) { return std::string(s.data, s.len); };
        if (text(d.key_name) != k.name || text(d.key_meta) != k.meta || text(d.plan_id) != a.plan ||
            text(d.account_meta) != a.meta)
            fail("the edge tells of key " + short_id(k) + " name " + text(d.key_name) + ", meta " + text(d.key_meta) +
                 ", plan \"" + text(d.plan_id) + "\", account meta " + text(d.account_meta) + "; the model says " +
                 k.name + ", " + k.meta + ", \"" + a.plan + "\", " + a.meta);
    }

    std::mt19937_64 rng_;
    ModelStore world_;
    Store *store_ = nullptr;
    std::unique_ptr<ConsoleApi> api_;
    std::unique_ptr<AdminApi> admin_api_;
    std::string admin_token_;
    ka_edge_t *edge_ = nullptr;  // world_'s
    std::vector<sockaddr_storage> client_addrs_;  // kClients' addresses
    char details_[KA_KEY_DETAILS_MAX];            // ka_edge_key_details' buffer
    int64_t now_ = kStart;
    std::vector<MAccount> accounts_;
    std::vector<MKey> keys_;
    int step_ = 0;
    std::string failure_;
    std::string log_;
};

class InvariantsModelTest : public ::testing::TestWithParam<Backend> {};

TEST_P(InvariantsModelTest, RandomSequencesKeepEveryInvariant) {
    const bool lmdb = GetParam() == Backend::kLmdb;
    keyauth::testing::run_model<Harness>(GetParam(), "KEYAUTH_MODEL", lmdb ? 1000 : 16, lmdb ? 40 : 30,
                                         "InvariantsModel");
}

INSTANTIATE_TEST_SUITE_P(Backends, InvariantsModelTest, keyauth::testing::kBothBackends,
                         keyauth::testing::backend_name);

}  // namespace
