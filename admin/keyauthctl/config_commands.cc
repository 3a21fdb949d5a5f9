// keyauthctl config set key-prefix NAME | config show: the deployment's
// settings, and the regular expressions to register with a secret scanner.
#include "command_support.h"
#include "commands.h"
#include "scanner_patterns.h"
#include "terminal_text.h"

namespace keyauthctl {

using nlohmann::json;

namespace {

// The settings config set knows.
constexpr const char *kKeyPrefixSetting = "key-prefix";

void print_config(bool as_json, const std::vector<std::string> &prefixes) {
    const keyauth::ScannerPatterns p = keyauth::scanner_patterns(prefixes);
    const std::vector<std::string> earlier(prefixes.begin() + 1, prefixes.end());
    std::string earlier_text;
    for (const std::string &n : earlier) earlier_text += (earlier_text.empty() ? "" : ", ") + n;
    print(as_json,
          json{{"keyPrefix", prefixes.front()},
               {"earlierKeyPrefixes", earlier},
               {"scannerPatterns",
                {{"keys", p.keys}, {"adminTokens", p.admin_tokens}, {"consoleTokens", p.console_tokens}}}},
          // NAMEs are [a-z0-9]: nothing in them to escape
          "key prefix: " + prefixes.front() + "\n" +
              "earlier key prefixes: " + (earlier.empty() ? "none" : earlier_text) + "\n" +
              "secret scanner patterns:\n" +
              "  keys            " + p.keys + "\n" +
              "  admin tokens    " + p.admin_tokens + "\n" +
              "  console tokens  " + p.console_tokens + "\n");
}

}  // namespace

int run_config(keyauth::Store &store, const Args &a) {
    const std::string &verb = a.words.at(1);
    if (verb == "show") {
        print_config(a.as_json, store.key_prefixes());
        return 0;
    }
    if (a.words.at(2) != kKeyPrefixSetting)
        throw UsageError("config set knows one setting, " + std::string(kKeyPrefixSetting) + ", not \"" +
                         shown(a.words.at(2)) + "\"");
    std::vector<std::string> prefixes;
    try {
        prefixes = store.set_key_prefix(a.words.at(3), operator_actor());
    } catch (const keyauth::StoreError &e) {
        // a bad NAME is the caller's input, refused before anything is written: exit 2
        if (e.kind() != keyauth::StoreError::Kind::kInvalid) throw;
        throw InputError("key prefix \"" + shown(a.words.at(3)) + "\": " + e.what() + " (nothing was changed)");
    }
    print_config(a.as_json, prefixes);
    return 0;
}

}  // namespace keyauthctl
