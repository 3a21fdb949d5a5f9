#include "command_line.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "quota_json.h"
#include "redact.h"
#include "rfc3339.h"

namespace keyauthctl {

extern const char kUsage[];
const char kUsage[] = R"(usage: keyauthctl --db PATH [--usage-db PATH] [--json] COMMAND
       keyauthctl --etcd URL[,URL...] [--json] COMMAND

  account create --name NAME (--entitlement RPM | --plan PLAN_ID | both) [--max-keys N]
                 [--allowed-scope S ...] [--quota QUOTA] [--allow-ip CIDR ...] [--meta JSON]
        create an account; prints its id and a one-time console token.
        --max-keys caps its active keys (default 100); --allowed-scope
        limits the scopes its keys may have (default: any). On a --plan,
        --entitlement may be left to the plan; a value given is the
        account's own and wins over the plan's
  account list
  account show ACC_ID
        its plan, effective rate, max keys and quota (used, remaining,
        when it resets), and which of them are its own
  account update ACC_ID [--name NAME] [--entitlement RPM|plan] [--max-keys N|plan]
                 [--quota QUOTA|plan] [--allowed-scope S ... | --any-scope]
                 [--allow-ip CIDR ... | --allow-ip any] [--meta JSON|none]
        change what is given (at least one); a lower --max-keys leaves
        existing keys alone; --any-scope lifts the scope limit; "plan"
        drops the account's own value and follows its plan's (exit 2 on
        an account with no plan: there is none to follow)
  account set-plan ACC_ID PLAN_ID|none
        put the account on a plan of the catalog (or on none)
  account set-entitlement --account ACC_ID --entitlement RPM
  account suspend ACC_ID
  account resume ACC_ID
        a suspended account's console calls and keys get 403 ACCOUNT_SUSPENDED
  account rotate-token ACC_ID [--grace-seconds N]
        a new console token, printed once; the old one stops now, or after
        N seconds (at most 604800)
  key create --account ACC_ID --name NAME --scope SCOPE [--scope SCOPE ...] --rate RPM
             [--expires-at TIME] [--count N] [--quota KEY_QUOTA] [--allow-ip CIDR ...]
             [--meta JSON]
        create an API key (or N alike: in one transaction on --db, in
        transactions of 40 on --etcd, each printed as it is made); prints the
        secret once. TIME is RFC 3339 (2030-01-01T00:00:00Z, or an offset),
        in the future, at most 3652 days ahead
  key list --account ACC_ID [--limit N] [--cursor KEY_ID]
  key show KEY_ID [--account ACC_ID]
  key update KEY_ID [--account ACC_ID] [--name NAME] [--scope SCOPE ...] [--rate RPM]
             [--expires-at TIME|never] [--quota KEY_QUOTA] [--allow-ip CIDR ... | --allow-ip any]
             [--meta JSON|none]
        change what is given (at least one); same id and secret. QUOTA is
        UNITS/day, UNITS/month or none (UNITS 1 to 281474976710655); a
        KEY_QUOTA may also be UNITS/total (credits that never refill); a
        call must fit both the key's and its account's quota. A key quota
        set here is managed: the console may lower it, not raise, move or
        remove it (none removes it and gives the key back to the console)
  key roll KEY_ID [--account ACC_ID] [--grace-seconds N]
        a successor with a new secret (printed once), the same name, scopes,
        rate, expiry and quota (and what the quota used); the old key is
        revoked now, or stops after N seconds
  key revoke KEY_ID [--account ACC_ID]
        with --account, a key of another account is not found (key show,
        update, roll and revoke alike)
  key report-leak --secret-stdin [--url URL] [--source NAME] [--notify]
        a secret found where it must not be (a key, an admin token kaa_...
        or a console token kac_...), read from standard input: a key of
        this deployment is revoked (--notify: only recorded and announced
        as key.leaked), a token always; audited with the URL where it was
        found. Prints its hex SHA-256, its type and what was done
  audit list [--account ACC_ID] [--limit N] [--cursor EVT_ID]
        who changed what, newest first: one account's trail, or every event;
        --limit 1 to 1000 (default 100)
  usage report [--account ACC_ID] [--key KEY_ID] --from DATE --to DATE --by day|month
               [--format csv|json] [--bom]
        what each account used (or one key), per UTC day or calendar month,
        from --from to --to inclusive (dates, YYYY-MM-DD, at most 400 days):
        allowed, rate-limited and quota-exceeded calls and units charged, with
        the account's plan. Every account with any use is a row per period
        (and --account's even without). CSV (the default; --json: JSON) is
        RFC 4180 with a header row, CRLF, UTF-8; a name that a spreadsheet
        would take for a formula (=, +, -, @, ;, tab or CR first) starts
        with an apostrophe. --bom starts the CSV with the UTF-8 byte order
        mark, which Excel on Windows needs to read it as UTF-8
  admin-token create --name NAME --scope SCOPE [--scope SCOPE ...] [--expires-at TIME]
        a token of the admin API (keyauthd --admin-listen) for one of your
        services, printed once: kaa_... SCOPE is one of accounts:read,
        accounts:write, accounts:plan, keys:read, keys:write, sessions:write,
        usage:read, audit:read, plans:write, fx:write, webhooks:write, or *
        (all of them, those to come too); give each service only its own
  admin-token list
        the tokens' ids, names, scopes and status (never a token)
  admin-token revoke TOKEN_ID
        the token is refused from its next call
  webhook create --url URL --event TYPE [--event TYPE ...] [--account ACC_ID]
                 [--webhook-key-file F]
        an endpoint keyauthd sends these events to, signed the Standard
        Webhooks way; prints its signing secret once: whsec_... URL is
        https://, at most 2048 characters. TYPE is one of key.created,
        key.updated, key.rolled, key.revoked, key.expiring, key.leaked,
        account.created, account.updated, account.plan_changed,
        account.suspended, account.resumed, quota.threshold; --account: that
        account's events only. The secret is derived from the deployment's
        webhook key, F (default --db PATH + "/webhook.key", made if missing;
        with --etcd give the file every keyauthd sends with)
  webhook list
  webhook delete WEBHOOK_ID
  webhook deliveries WEBHOOK_ID [--status pending|delivered|dead] [--limit N]
                     [--cursor EVT_ID]
        each event sent to the endpoint: attempts, the last answer, and when
        the next attempt is due; a dead one failed all 8 attempts
  plans import FILE.json [--retire OLD=NEW ...]
        validate a whole catalog and replace the current one atomically; a
        bad file exits 2 and writes nothing. A catalog without a plan that
        accounts are on is refused (exit 1, PLAN_IN_USE, naming them) unless
        --retire moves them, in the same transaction, to plan NEW of the file
  plans list
  plans show PLAN_ID
        with --json, each plan's entitlements too
  fx set RATE
        the exchange rate, INR per USD: a positive decimal, at most 6 decimals
  fx show
  config set key-prefix NAME
        new keys are NAME_... (2 to 10 lowercase letters or digits, not kac
        or kaa; the default is ka), so that a secret scanner can tell this
        deployment's keys from others'; keys of earlier prefixes keep working
  config show
        the key prefix, the earlier ones, and the regular expressions to
        register with a secret scanner for keys, admin and console tokens
  doctor [--user USER]
        check the store without changing it: schema, permissions, map usage,
        and whether USER (the nginx worker user) can use it; exit 1 on a failure

  --db PATH       the LMDB environment directory (or $KEYAUTH_DB); created if missing
  --usage-db PATH the usage store the nginx workers write (nginx's
                  keyauth_usage_db), where account show, key show and usage
                  report read what was used (default: --db PATH + ".usage");
                  not for --etcd, not for doctor
  --etcd URL[,URL...]
                  many-edge mode: the etcd cluster that holds the store,
                  instead of --db (or $KEYAUTH_ETCD); not for doctor
  --etcd-prefix P the store's key prefix in etcd (default /keyauth/1)
  --etcd-cacert F, --etcd-cert F, --etcd-key F
                  TLS to https:// members: the CA to verify them with, and a
                  client certificate and key for members that ask for one
  --json          machine-readable output
  --map-size MIB  a map of at least this size (default: as the store was last
                  written, 4096 for a new store); a write that fills it
                  doubles it, as far as the disk allows; not for doctor

Options go anywhere after keyauthctl, as "--name VALUE" or "--name=VALUE"
(--json, --any-scope and --bom take no value); only --scope, --allowed-scope,
--allow-ip, --event and --retire may be given more than once. --allow-ip limits
where a key (or every key of an account) may be used from: 1 to 32 CIDRs
(10.0.0.0/8, 2001:db8::/32, or an address alone); "any" lifts the list.
--meta sets a JSON object of at most 1 KiB (as compact JSON) that keyauth
stores and hands on to the upstream, never interprets; "none" removes it.
An unknown command or option, a missing value, a repeated option or an
extra argument is a usage error (exit 2); a store that
refuses the request exits 1, naming the error code where there is one
(KEY_REVOKED, KEY_LIMIT_REACHED, ...).

Every write is in the audit trail under the login of the real user running
keyauthctl, or $SUDO_USER when it runs under sudo as root (SUDO_UID set, real
uid 0). Text output shows control characters in names, actors and changed
values escaped (C0 and C1 controls and the bidi controls as \u001b, \u202e;
bytes that are not UTF-8 as \xNN), so that stored text cannot drive the
terminal; --json output is plain JSON.
)";

std::string shown(std::string s) {
    keyauth::redact_secrets(s.data(), s.size());
    if (s.size() > 80) s.resize(80);
    return s;
}

std::optional<std::string> Args::opt(const std::string &name) const {
    auto it = options.find(name);
    if (it == options.end()) return std::nullopt;
    if (it->second.size() > 1) throw UsageError("--" + name + " given more than once");
    return it->second.front();
}

std::string Args::need(const std::string &name) const {
    auto v = opt(name);
    if (!v) throw UsageError("missing --" + name);
    return *v;
}

std::vector<std::string> Args::all(const std::string &name) const {
    auto it = options.find(name);
    return it == options.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// Nothing else is accepted: an unknown command or option, an option given
// twice (but a repeatable one), a missing value or a stray argument is a
// usage error.
const std::vector<Command> kCommands = {
    {"init", "", {}, {}, true},
    {"doctor", "", {}, {{"user", false, false}}, false},
    {"account",
     "create",
     {},
     {{"name", true, false},
      {"entitlement", false, false},
      {"max-keys", false, false},
      {"allowed-scope", false, true},
      {"plan", false, false},
      {"quota", false, false},
      {"allow-ip", false, true},
      {"meta", false, false}},
     true},
    {"account", "list", {}, {}, true},
    {"account", "show", {"ACC_ID"}, {}, true},
    {"account",
     "update",
     {"ACC_ID"},
     {{"name", false, false},
      {"entitlement", false, false},
      {"max-keys", false, false},
      {"quota", false, false},
      {"allowed-scope", false, true},
      {"any-scope", false, false, true},
      {"allow-ip", false, true},
      {"meta", false, false}},
     true},
    {"account", "set-plan", {"ACC_ID", "PLAN_ID"}, {}, true},
    {"account", "set-entitlement", {}, {{"account", true, false}, {"entitlement", true, false}}, true},
    {"account", "suspend", {"ACC_ID"}, {}, true},
    {"account", "resume", {"ACC_ID"}, {}, true},
    {"account", "rotate-token", {"ACC_ID"}, {{"grace-seconds", false, false}}, true},
    {"key",
     "create",
     {},
     {{"account", true, false},
      {"name", true, false},
      {"scope", true, true},
      {"rate", true, false},
      {"expires-at", false, false},
      {"count", false, false},
      {"quota", false, false},
      {"allow-ip", false, true},
      {"meta", false, false}},
     true},
    {"key",
     "list",
     {},
     {{"account", true, false}, {"limit", false, false}, {"cursor", false, false}},
     true},
    {"key", "show", {"KEY_ID"}, {{"account", false, false}}, true},
    {"key",
     "update",
     {"KEY_ID"},
     {{"account", false, false},
      {"name", false, false},
      {"scope", false, true},
      {"rate", false, false},
      {"expires-at", false, false},
      {"quota", false, false},
      {"allow-ip", false, true},
      {"meta", false, false}},
     true},
    {"key", "roll", {"KEY_ID"}, {{"account", false, false}, {"grace-seconds", false, false}}, true},
    {"key", "revoke", {"KEY_ID"}, {{"account", false, false}}, true},
    {"key",
     "report-leak",
     {},
     {{"secret-stdin", false, false, true}, {"url", false, false}, {"source", false, false}, {"notify", false, false, true}},
     true},
    {"audit", "list", {}, {{"account", false, false}, {"limit", false, false}, {"cursor", false, false}}, true},
    {"usage",
     "report",
     {},
     {{"account", false, false},
      {"key", false, false},
      {"from", true, false},
      {"to", true, false},
      {"by", true, false},
      {"format", false, false},
      {"bom", false, false, true}},
     true},
    {"admin-token",
     "create",
     {},
     {{"name", true, false}, {"scope", true, true}, {"expires-at", false, false}},
     true},
    {"admin-token", "list", {}, {}, true},
    {"admin-token", "revoke", {"TOKEN_ID"}, {}, true},
    {"webhook",
     "create",
     {},
     {{"url", true, false}, {"event", true, true}, {"account", false, false}, {"webhook-key-file", false, false}},
     true},
    {"webhook", "list", {}, {}, true},
    {"webhook", "delete", {"WEBHOOK_ID"}, {}, true},
    {"webhook",
     "deliveries",
     {"WEBHOOK_ID"},
     {{"status", false, false}, {"limit", false, false}, {"cursor", false, false}},
     true},
    {"plans", "import", {"FILE"}, {{"retire", false, true}}, true},
    {"plans", "list", {}, {}, true},
    {"plans", "show", {"PLAN_ID"}, {}, true},
    {"fx", "set", {"RATE"}, {}, true},
    {"fx", "show", {}, {}, true},
    {"config", "set", {"SETTING", "NAME"}, {}, true},
    {"config", "show", {}, {}, true},
};

// Options every command takes (--map-size: those that open the store).
const char *const kGlobalOptions[] = {"db",          "usage-db",  "map-size", "etcd",
                                      "etcd-prefix", "etcd-cacert", "etcd-cert", "etcd-key"};

bool is_etcd_option(const std::string &name) { return name.rfind("etcd", 0) == 0; }

// The option of that name in any command (a name means the same, flag or
// not, wherever it is taken), or null.
const Opt *find_option(const std::string &name) {
    for (const auto &c : kCommands)
        for (const auto &o : c.options)
            if (name == o.name) return &o;
    return nullptr;
}

bool known_option(const std::string &name) {
    for (const char *g : kGlobalOptions)
        if (name == g) return true;
    return find_option(name) != nullptr;
}

bool is_flag(const std::string &name) {
    const Opt *o = find_option(name);
    return o && o->flag;
}

// Splits the command line into words and options; "--name=value" and
// "--name value" alike, "--" ends the options. A value that starts with
// "--" is taken for a forgotten one (write --name=VALUE to pass it).
Args split_args(int argc, char **argv) {
    Args a;
    bool json_seen = false, only_words = false;
    for (int i = 1; i < argc; i++) {
        std::string s = argv[i];
        if (only_words) {
            a.words.push_back(s);
            continue;
        }
        if (s == "--") {
            only_words = true;
            continue;
        }
        if (s == "-h" || s == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        }
        // "-1", "-0.5": a (bad) number, for the command to judge
        const bool number = s.size() > 1 && (std::isdigit(static_cast<unsigned char>(s[1])) || s[1] == '.');
        const bool option = s.size() > 1 && s[0] == '-' && !number;
        if (!option) {
            a.words.push_back(s);
            continue;
        }
        if (s.rfind("--", 0) != 0) throw UsageError("unknown option \"" + shown(s) + "\"");
        std::string name = s.substr(2), value;
        size_t eq = name.find('=');
        const bool inline_value = eq != std::string::npos;
        if (inline_value) {
            value = name.substr(eq + 1);
            name.resize(eq);
        }
        if (name == "json") {
            if (inline_value) throw UsageError("--json takes no value");
            if (json_seen) throw UsageError("--json given more than once");
            json_seen = a.as_json = true;
            continue;
        }
        if (!known_option(name)) throw UsageError("unknown option \"--" + shown(name) + "\"");
        if (is_flag(name)) {
            if (inline_value) throw UsageError("--" + name + " takes no value");
            a.options[name].push_back("");
            continue;
        }
        if (!inline_value) {
            if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
            value = argv[++i];
            if (value.size() > 2 && value.rfind("--", 0) == 0)
                throw UsageError("--" + name + " needs a value, not the option \"" + shown(value) +
                                 "\" (to pass a value that starts with \"--\", write --" + name +
                                 "=VALUE)");
        }
        a.options[name].push_back(value);
    }
    return a;
}

// --quota's form, before anything is opened.
void check_quota_arg(const Args &a, const Command &c) {
    if (auto v = a.opt("quota")) {
        const bool key = std::string(c.group) == "key";
        parse_quota_arg(*v, key ? keyauth::QuotaOwner::kKey : keyauth::QuotaOwner::kAccountOrPlan,
                        !key && std::string(c.verb) == "update");
    }
}

// Finds the command and checks its arguments against it, before anything
// opens (and so creates) the store.
void check_args(Args &a) {
    if (a.words.empty()) throw UsageError("no command");
    const std::string &group = a.words[0];
    std::string verbs;
    bool group_known = false;
    for (const auto &c : kCommands) {
        if (group != c.group) continue;
        group_known = true;
        if (*c.verb == '\0') {
            a.command = &c;
            break;
        }
        verbs += std::string(verbs.empty() ? "" : ", ") + c.verb;
        if (a.words.size() > 1 && a.words[1] == c.verb) {
            a.command = &c;
            break;
        }
    }
    if (!group_known) throw UsageError("unknown command \"" + shown(group) + "\"");
    if (a.command == nullptr) {
        if (a.words.size() < 2) throw UsageError(group + " needs a command: " + verbs);
        throw UsageError("unknown " + group + " command \"" + shown(a.words[1]) + "\"");
    }
    const Command &c = *a.command;
    const std::string name = *c.verb ? std::string(c.group) + " " + c.verb : std::string(c.group);
    const size_t first = *c.verb ? 2 : 1;
    if (a.words.size() > first + c.positionals.size())
        throw UsageError("unexpected argument \"" + shown(a.words[first + c.positionals.size()]) +
                         "\" after " + name);
    if (a.words.size() < first + c.positionals.size())
        throw UsageError(name + " needs " + c.positionals[a.words.size() - first]);
    for (const auto &[opt, values] : a.options) {
        const Opt *spec = nullptr;
        for (const auto &o : c.options)
            if (opt == o.name) spec = &o;
        // doctor examines an LMDB directory: it takes no etcd options
        const bool global = opt == "db" || (is_etcd_option(opt) && std::string(c.group) != "doctor") ||
                            ((opt == "map-size" || opt == "usage-db") && c.opens_store);
        if (spec == nullptr && !global) throw UsageError(name + " does not take --" + opt);
        if (values.size() > 1 && !(spec && spec->repeatable))
            throw UsageError("--" + opt + " given more than once");
    }
    for (const auto &o : c.options)
        if (o.required && !a.options.count(o.name)) throw UsageError(name + " needs --" + o.name);
    if (name == "account create" && !a.options.count("entitlement") && !a.options.count("plan"))
        throw UsageError("account create needs --entitlement (or --plan, to follow the plan's rate)");
    check_quota_arg(a, c);
    if (a.options.count("etcd")) {
        if (a.options.count("db")) throw UsageError("--db and --etcd name two stores: give one");
        if (a.options.count("map-size")) throw UsageError("--map-size is for an LMDB store (--db), not etcd");
    } else {
        for (const auto &[opt, values] : a.options)
            if (is_etcd_option(opt)) throw UsageError("--" + opt + " needs --etcd");
    }
}

}  // namespace

uint32_t parse_u32(const std::string &s, const char *what) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v > UINT32_MAX)
        throw UsageError(std::string(what) + " must be a positive integer, not \"" + shown(s) + "\"");
    return static_cast<uint32_t>(v);
}

std::optional<keyauth::Quota> parse_quota_arg(const std::string &v, keyauth::QuotaOwner owner, bool plan_ok) {
    if (plan_ok && v == "plan") return std::nullopt;
    std::string why;
    auto q = keyauth::quota_from_text(v, owner, why);
    if (!q) throw UsageError("--quota \"" + shown(v) + "\": " + why + (plan_ok ? ", or plan" : ""));
    return q;
}

keyauth::Expiry parse_time_arg(const std::string &s, const char *what, bool allow_never) {
    if (allow_never && s == "never") return std::nullopt;
    if (auto ms = keyauth::parse_time(s)) return *ms;  // the epoch too: a time, in the past
    throw UsageError(std::string(what) + " must be an RFC 3339 time such as 2030-01-01T00:00:00Z" +
                     (allow_never ? " or \"never\"" : "") + ", not \"" + shown(s) + "\"");
}

keyauth::Id parse_id_arg(std::string_view prefix, const std::string &s, const char *what) {
    keyauth::Id id{};
    if (!keyauth::parse_id(prefix, s, id)) {
        throw UsageError(std::string(what) + " \"" + shown(s) + "\" is not a " + std::string(prefix) +
                         "<24 hex digits> id");
    }
    return id;
}

Args parse_command_line(int argc, char **argv) {
    Args a = split_args(argc, argv);
    check_args(a);
    return a;
}

}  // namespace keyauthctl
