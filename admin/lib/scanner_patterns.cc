#include "scanner_patterns.h"

#include "key_format.h"

namespace keyauth {
namespace {

// What follows a head: the random characters and the checksum, then no
// more of a word.
std::string body_pattern() {
    return "_[0-9A-Za-z]{" + std::to_string(kRandomChars + kChecksumChars) + "}\\b";
}

// A token's head without its '_'.
std::string token_name(std::string_view prefix) { return std::string(prefix.substr(0, prefix.size() - 1)); }

}  // namespace

ScannerPatterns scanner_patterns(const std::vector<std::string> &key_prefixes) {
    // NAMEs are [a-z0-9] (valid_key_prefix_name): nothing to escape
    std::string names;
    for (const std::string &n : key_prefixes) names += (names.empty() ? "" : "|") + n;
    if (names.empty()) names = std::string(kDefaultKeyPrefixName);
    ScannerPatterns out;
    out.keys = "\\b(?:" + names + ")" + body_pattern();
    out.admin_tokens = "\\b" + token_name(kAdminTokenPrefix) + body_pattern();
    out.console_tokens = "\\b" + token_name(kConsoleTokenPrefix) + body_pattern();
    return out;
}

}  // namespace keyauth
