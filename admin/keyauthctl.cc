// keyauthctl: the operator's CLI over the same LMDB store as keyauthd.
//
//   keyauthctl --db PATH [--json] COMMAND ...
//
// Exit status: 0 done, 1 the store refused (not found, invalid input, I/O),
// 2 usage error.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fstream>
#include <sstream>

#include "catalog_json.h"
#include "doctor.h"
#include "key_json.h"
#include "money.h"
#include "no_core_dumps.h"
#include "redact.h"
#include "store.h"

using keyauth::Id;
using nlohmann::json;

namespace {

const char kUsage[] = R"(usage: keyauthctl --db PATH [--json] COMMAND

  account create --name NAME --entitlement RPM
        create an account; prints its id and a one-time console token
  account list
  account set-entitlement --account ACC_ID --entitlement RPM
  key create --account ACC_ID --name NAME --scope SCOPE [--scope SCOPE ...] --rate RPM [--count N]
        create an API key (or N alike, in one transaction); prints the secret once
  key list --account ACC_ID [--limit N] [--cursor KEY_ID]
  key revoke KEY_ID [--account ACC_ID]
  plans import FILE.json
        validate a whole catalog and replace the current one atomically
  plans list
  fx set RATE
        the exchange rate, INR per USD: a positive decimal, at most 6 decimals
  fx show
  doctor [--user USER]
        check the store without changing it: schema, permissions, map usage,
        and whether USER (the nginx worker user) can use it; exit 1 on a failure

  --db PATH       the LMDB environment directory (or $KEYAUTH_DB); created if missing
  --json          machine-readable output
  --map-size MIB  a map of at least this size (default: as the store was last
                  written, 4096 for a new store); not for doctor

Options go anywhere after keyauthctl, as "--name VALUE" or "--name=VALUE";
only --scope may be given more than once. An unknown command or option, a
missing value, a repeated option or an extra argument is a usage error
(exit 2); a store that refuses the request exits 1.
)";

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// An argument echoed in a message: a secret pasted there is masked, then cut.
std::string shown(std::string s) {
    keyauth::redact_secrets(s.data(), s.size());
    if (s.size() > 80) s.resize(80);
    return s;
}

// Every command: its words, its positional arguments (names, for messages),
// and the options it takes, each with a value. Nothing else is accepted:
// an unknown command or option, an option given twice (but a repeatable
// one), a missing value or a stray argument is a usage error.
struct Opt {
    const char *name;
    bool required;
    bool repeatable;
};

struct Command {
    const char *group;
    const char *verb;  // "" for a command of one word
    std::vector<const char *> positionals;
    std::vector<Opt> options;
    bool opens_store;  // and so takes --map-size
};

const std::vector<Command> kCommands = {
    {"init", "", {}, {}, true},
    {"doctor", "", {}, {{"user", false, false}}, false},
    {"account", "create", {}, {{"name", true, false}, {"entitlement", true, false}}, true},
    {"account", "list", {}, {}, true},
    {"account", "set-entitlement", {}, {{"account", true, false}, {"entitlement", true, false}}, true},
    {"key",
     "create",
     {},
     {{"account", true, false},
      {"name", true, false},
      {"scope", true, true},
      {"rate", true, false},
      {"count", false, false}},
     true},
    {"key",
     "list",
     {},
     {{"account", true, false}, {"limit", false, false}, {"cursor", false, false}},
     true},
    {"key", "revoke", {"KEY_ID"}, {{"account", false, false}}, true},
    {"plans", "import", {"FILE"}, {}, true},
    {"plans", "list", {}, {}, true},
    {"fx", "set", {"RATE"}, {}, true},
    {"fx", "show", {}, {}, true},
};

// Options every command takes (--map-size: those that open the store).
const char *const kGlobalOptions[] = {"db", "map-size"};

// "--flag value" options (repeatable) plus positional words.
struct Args {
    std::vector<std::string> words;
    std::map<std::string, std::vector<std::string>> options;
    const Command *command = nullptr;

    std::optional<std::string> opt(const std::string &name) const {
        auto it = options.find(name);
        if (it == options.end()) return std::nullopt;
        if (it->second.size() > 1) throw UsageError("--" + name + " given more than once");
        return it->second.front();
    }
    std::string need(const std::string &name) const {
        auto v = opt(name);
        if (!v) throw UsageError("missing --" + name);
        return *v;
    }
    std::vector<std::string> all(const std::string &name) const {
        auto it = options.find(name);
        return it == options.end() ? std::vector<std::string>{} : it->second;
    }
};

bool known_option(const std::string &name) {
    for (const char *g : kGlobalOptions)
        if (name == g) return true;
    for (const auto &c : kCommands)
        for (const auto &o : c.options)
            if (name == o.name) return true;
    return false;
}

// Splits the command line into words and options; "--name=value" and
// "--name value" alike, "--" ends the options. A value that starts with
// "--" is taken for a forgotten one (write --name=VALUE to pass it).
Args split_args(int argc, char **argv, bool &as_json) {
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
            json_seen = as_json = true;
            continue;
        }
        if (!known_option(name)) throw UsageError("unknown option \"--" + shown(name) + "\"");
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
        const bool global = opt == "db" || (opt == "map-size" && c.opens_store);
        if (spec == nullptr && !global) throw UsageError(name + " does not take --" + opt);
        if (values.size() > 1 && !(spec && spec->repeatable))
            throw UsageError("--" + opt + " given more than once");
    }
    for (const auto &o : c.options)
        if (o.required && !a.options.count(o.name)) throw UsageError(name + " needs --" + o.name);
}

uint32_t parse_u32(const std::string &s, const char *what) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v > UINT32_MAX)
        throw UsageError(std::string(what) + " must be a positive integer, not \"" + s + "\"");
    return static_cast<uint32_t>(v);
}

Id parse_id_arg(std::string_view prefix, const std::string &s, const char *what) {
    Id id{};
    if (!keyauth::parse_id(prefix, s, id)) {
        std::string shown = s;  // a secret pasted here is masked, then cut
        keyauth::redact_secrets(shown.data(), shown.size());
        if (shown.size() > 80) shown.resize(80);
        throw UsageError(std::string(what) + " \"" + shown + "\" is not a " + std::string(prefix) +
                         "<24 hex digits> id");
    }
    return id;
}

void print(bool as_json, const json &j, const std::string &text) {
    if (as_json) std::cout << j.dump(2) << "\n";
    else std::cout << text;
}

std::string key_line(const json &k) {
    std::string scopes;
    for (const auto &s : k["scopes"]) scopes += (scopes.empty() ? "" : ",") + s.get<std::string>();
    return k["id"].get<std::string>() + "  " + k["prefix"].get<std::string>() + "...  " +
           k["status"].get<std::string>() + "  " + std::to_string(k["rateLimitPerMinute"].get<uint32_t>()) +
           "/min  " + scopes + "  " + k["name"].get<std::string>() + "\n";
}

uint32_t entitlement_of(keyauth::Store &store, const Id &account) {
    auto acc = store.find_account(account);
    return acc ? acc->record.entitlement_rpm : 0;
}

int run_account(keyauth::Store &store, const Args &a, bool as_json) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") {
        auto made = store.create_account(a.need("name"), parse_u32(a.need("entitlement"), "--entitlement"));
        json j = keyauth::account_to_json(made.account);
        j["consoleToken"] = made.console_token;
        print(as_json, j,
              "account " + j["id"].get<std::string>() + " created\nconsole token (shown once): " +
                  made.console_token + "\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const auto &acc : store.list_accounts()) {
            json j = keyauth::account_to_json(acc);
            text += j["id"].get<std::string>() + "  " + std::to_string(acc.record.entitlement_rpm) +
                    "/min  " + j["status"].get<std::string>() + "  " + acc.record.name + "\n";
            arr.push_back(j);
        }
        print(as_json, json{{"accounts", arr}}, text);
        return 0;
    }
    if (verb == "set-entitlement") {
        Id id = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto acc = store.set_entitlement(id, parse_u32(a.need("entitlement"), "--entitlement"));
        json j = keyauth::account_to_json(acc);
        print(as_json, j,
              "account " + j["id"].get<std::string>() + " entitlement " +
                  std::to_string(acc.record.entitlement_rpm) + "/min\n");
        return 0;
    }
    throw UsageError("unknown account command \"" + verb + "\"");
}

int run_key(keyauth::Store &store, const Args &a, bool as_json) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "create") {
        Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto count = a.opt("count");
        auto made = store.create_keys(account, a.need("name"), a.all("scope"),
                                      parse_u32(a.need("rate"), "--rate"),
                                      count ? parse_u32(*count, "--count") : 1);
        uint32_t ent = entitlement_of(store, account);
        json all = json::array();
        std::string text;
        for (const auto &k : made) {
            json j = keyauth::key_to_json(k.key, ent);
            j["secret"] = k.secret;
            text += "key " + j["id"].get<std::string>() + " created\nsecret (shown once): " +
                    k.secret + "\n";
            all.push_back(std::move(j));
        }
        print(as_json, count ? json{{"keys", all}} : all.front(), text);
        return 0;
    }
    if (verb == "list") {
        Id account = parse_id_arg(keyauth::kAccountIdPrefix, a.need("account"), "--account");
        auto limit = a.opt("limit");
        auto cursor = a.opt("cursor");
        std::optional<Id> after;
        if (cursor) after = parse_id_arg(keyauth::kKeyIdPrefix, *cursor, "--cursor");
        auto page = store.list_keys(account, limit ? parse_u32(*limit, "--limit")
                                                   : keyauth::Store::kMaxPageSize,
                                    after);
        uint32_t ent = entitlement_of(store, account);
        json arr = json::array();
        std::string text;
        for (const auto &k : page.keys) {
            arr.push_back(keyauth::key_to_json(k, ent));
            text += key_line(arr.back());
        }
        json next = page.next ? json(keyauth::id_to_string(keyauth::kKeyIdPrefix, *page.next))
                              : json(nullptr);
        if (page.next) text += "more: --cursor " + next.get<std::string>() + "\n";
        print(as_json, json{{"keys", arr}, {"nextCursor", next}}, text);
        return 0;
    }
    if (verb == "revoke") {
        if (a.words.size() != 3) throw UsageError("key revoke takes one KEY_ID");
        Id key = parse_id_arg(keyauth::kKeyIdPrefix, a.words[2], "KEY_ID");
        std::optional<Id> owner;
        if (auto acc = a.opt("account")) owner = parse_id_arg(keyauth::kAccountIdPrefix, *acc, "--account");
        auto rec = store.revoke_key(owner, key);
        json j = keyauth::key_to_json(rec, entitlement_of(store, rec.account_id));
        print(as_json, j, "key " + j["id"].get<std::string>() + " revoked\n");
        return 0;
    }
    throw UsageError("unknown key command \"" + verb + "\"");
}

int run_plans(keyauth::Store &store, const Args &a, bool as_json) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    if (verb == "import") {
        if (a.words.size() != 3) throw UsageError("plans import takes one FILE");
        std::ifstream in(a.words[2], std::ios::binary);
        if (!in) throw std::runtime_error("cannot read " + a.words[2]);
        std::stringstream text;
        text << in.rdbuf();
        auto plans = keyauth::parse_catalog(text.str());
        store.import_plans(plans);
        print(as_json, json{{"imported", plans.size()}},
              "imported " + std::to_string(plans.size()) + " plans\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const auto &p : store.list_plans()) {
            arr.push_back(keyauth::plan_to_json(p));
            text += std::to_string(p.sort_order) + "  " + p.id + "  " +
                    arr.back()["priceInr"].get<std::string>() + " INR  " + p.name +
                    (p.popular ? "  (popular)" : "") + "\n";
        }
        print(as_json, json{{"plans", arr}}, text);
        return 0;
    }
    throw UsageError("unknown plans command \"" + verb + "\"");
}

int run_fx(keyauth::Store &store, const Args &a, bool as_json) {
    const std::string verb = a.words.size() > 1 ? a.words[1] : "";
    std::optional<keyauth::FxRecord> fx;
    if (verb == "set") {
        uint64_t micro = 0;
        if (a.words.size() != 3 || !keyauth::parse_rate(a.words[2], micro))
            throw UsageError("fx set takes RATE: INR per USD, a positive decimal with at most 6 decimals");
        fx = store.set_exchange_rate(micro);
    } else if (verb == "show") {
        fx = store.exchange_rate();
        if (!fx) {
            print(as_json, json{{"exchangeRate", nullptr}}, "no exchange rate set\n");
            return 0;
        }
    } else {
        throw UsageError("unknown fx command \"" + verb + "\"");
    }
    char rate[keyauth::kRateTextMax];
    keyauth::format_rate(fx->inr_per_usd_micro, rate);
    print(as_json, json{{"exchangeRate", rate}, {"setAt", keyauth::format_time(fx->set_ms)}},
          std::string("1 USD = ") + rate + " INR (set " + keyauth::format_time(fx->set_ms) + ")\n");
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthctl: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }
    bool as_json = false;
    std::string db = getenv("KEYAUTH_DB") ? getenv("KEYAUTH_DB") : "";
    try {
        Args a = split_args(argc, argv, as_json);
        check_args(a);
        if (auto given = a.opt("db")) db = *given;
        if (db.empty()) throw UsageError("no --db PATH (or $KEYAUTH_DB)");
        const std::string &group = a.words[0];
        if (group == "doctor") {
            // before anything opens (and so creates) the store
            auto findings = keyauth::diagnose(db, a.opt("user"));
            json arr = json::array();
            std::string text;
            bool failed = false;
            for (const auto &f : findings) {
                const char *level = f.level == keyauth::Finding::Level::kOk     ? "ok"
                                    : f.level == keyauth::Finding::Level::kWarn ? "warn"
                                                                                : "fail";
                failed = failed || f.level == keyauth::Finding::Level::kFail;
                arr.push_back({{"level", level}, {"message", f.message}});
                text += std::string(level) + (f.level == keyauth::Finding::Level::kOk ? "    " : "  ") +
                        f.message + "\n";
            }
            print(as_json, json{{"findings", arr}}, text);
            return failed ? 1 : 0;
        }
        size_t map_size = 0;
        if (auto mib = a.opt("map-size")) {
            uint32_t n = parse_u32(*mib, "--map-size");
            if (n < 1 || n > (1u << 20)) throw UsageError("--map-size takes MiB, from 1 to 1048576");
            map_size = size_t{n} << 20;
        }
        keyauth::Store store(db, map_size);
        if (group == "init") {
            print(as_json, json{{"db", db}, {"schemaVersion", KA_SCHEMA_VERSION}},
                  "keyauth store ready at " + db + "\n");
            return 0;
        }
        if (group == "account") return run_account(store, a, as_json);
        if (group == "plans") return run_plans(store, a, as_json);
        if (group == "fx") return run_fx(store, a, as_json);
        return run_key(store, a, as_json);
    } catch (const UsageError &e) {
        std::cerr << "keyauthctl: " << e.what() << "\n\n" << kUsage;
        return 2;
    } catch (const keyauth::StoreError &e) {
        std::cerr << "keyauthctl: " << e.what() << "\n";
        return 1;
    } catch (const std::exception &e) {
        std::cerr << "keyauthctl: " << e.what() << "\n";
        return 1;
    }
}
