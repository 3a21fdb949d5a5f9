// The regular expressions a deployment registers with a secret scanner
// (GitHub's partner program, its own): one for its API keys, of every key
// prefix NAME it has had (key_format.h), one for admin tokens and one for
// console tokens. Each matches a whole secret: its head, 32 random and 6
// checksum characters, between word boundaries. ECMAScript, RE2 and PCRE
// read them alike.
#pragma once

#include <string>
#include <vector>

namespace keyauth {

struct ScannerPatterns {
    std::string keys;            // \b(?:acme|ka)_[0-9A-Za-z]{38}\b
    std::string admin_tokens;    // \bkaa_[0-9A-Za-z]{38}\b
    std::string console_tokens;  // \bkac_[0-9A-Za-z]{38}\b
};

// key_prefixes: the store's NAMEs (Store::key_prefixes), valid ones, newest
// first; none: the default's.
ScannerPatterns scanner_patterns(const std::vector<std::string> &key_prefixes);

}  // namespace keyauth
