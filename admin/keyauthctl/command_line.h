// keyauthctl's command line: the table of commands with the options each
// takes, and the checks that refuse anything else before the store is opened.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "key_rules.h"
#include "quota_json.h"

namespace keyauthctl {

extern const char kUsage[];

// Exit status 2, with the usage.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Exit status 2 without the usage: a well-formed command whose input (a
// catalog file) is refused before anything is written.
struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Opt {
    const char *name;
    bool required;
    bool repeatable;
    bool flag = false;  // takes no value: --any-scope
};

// Its words, its positional arguments (names, for messages), and the
// options it takes, each with a value.
struct Command {
    const char *group;
    const char *verb;  // "" for a command of one word
    std::vector<const char *> positionals;
    std::vector<Opt> options;
    bool opens_store;  // and so takes --map-size
};

// "--flag value" options (repeatable) plus positional words.
struct Args {
    std::vector<std::string> words;
    std::map<std::string, std::vector<std::string>> options;
    const Command *command = nullptr;
    bool as_json = false;

    std::optional<std::string> opt(const std::string &name) const;
    std::string need(const std::string &name) const;
    std::vector<std::string> all(const std::string &name) const;
    bool has(const std::string &name) const { return options.count(name) != 0; }
};

// Splits and checks the whole line against the table; -h/--help prints the
// usage and exits 0. Throws UsageError.
Args parse_command_line(int argc, char **argv);

uint32_t parse_u32(const std::string &s, const char *what);
keyauth::Id parse_id_arg(std::string_view prefix, const std::string &s, const char *what);
// --quota: UNITS/day, UNITS/month (a key's also UNITS/total) or none;
// "plan" (nullopt: follow the plan) where plan_ok.
std::optional<keyauth::Quota> parse_quota_arg(const std::string &v, keyauth::QuotaOwner owner, bool plan_ok);
// An RFC 3339 time, or "never" (nullopt) where allow_never.
keyauth::Expiry parse_time_arg(const std::string &s, const char *what, bool allow_never);

// An argument echoed in a message: a secret pasted there is masked, then cut.
std::string shown(std::string s);

}  // namespace keyauthctl
