// GitHub's secret scanning signing keys (issue #47): the list GitHub
// publishes at https://api.github.com/meta/public_keys/secret_scanning,
//   {"public_keys": [{"key_identifier": "<hex>", "key": "<PEM>", "is_current": true}, ...]}
// and a cache of it that checks a report's Github-Public-Key-Identifier and
// Github-Public-Key-Signature headers against the body.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ecdsa_signature.h"

namespace keyauth {

// GitHub's identifiers are 64 hex digits; anything much longer is not one.
inline constexpr size_t kMaxGithubKeyIdentifierBytes = 256;

struct GithubPublicKey {
    std::string key_identifier;
    std::string key_pem;
    bool is_current = false;  // GitHub's newest; older keys still verify
};

// The published list. False (and `error`, never quoting the text) unless it
// is an object whose "public_keys" is an array, with no member name repeated
// (strict_json.h), and at least one entry with a non-empty string
// "key_identifier" (at most kMaxGithubKeyIdentifierBytes) and a string "key"
// (at most kMaxPublicKeyPemBytes); other entries are skipped (a key type
// GitHub may add later must not hide the keys we can use). Never throws but
// std::bad_alloc.
bool parse_github_keys(std::string_view text, std::vector<GithubPublicKey> &out, std::string &error);

struct GithubKeysOptions {
    std::string url = "https://api.github.com/meta/public_keys/secret_scanning";  // --github-keys-url
    // --github-keys-file: read instead of url when set (re-read on the same
    // schedule as a fetch)
    std::string file;
    std::chrono::milliseconds fetch_timeout{5000};
    // After the first fetch, another happens at most once per this: for an
    // unknown identifier when a list is held, for any report when none is.
    std::chrono::seconds min_refetch{60};
    std::function<int64_t()> clock;  // ms; default the wall clock; injectable for tests
};

enum class SignatureVerdict {
    kValid,
    kBadSignature,  // 401: wrong, malformed or missing signature or identifier
    kUnknownKey,    // 401: the identifier is in no list we could have
    kUnavailable,   // 503: no list could ever be had (the scanner retries)
};

// "valid", "bad_signature", "unknown_key", "unavailable": for logs and
// metric labels.
const char *signature_verdict_name(SignatureVerdict verdict);

class GithubKeys {
public:
    explicit GithubKeys(GithubKeysOptions options);

    // Fetches the list on the first call (never in the constructor) and
    // caches it. An identifier not in the cache refetches if the last fetch
    // began min_refetch or longer ago, else kUnknownKey. No list could ever
    // be had (the fetch failed, the answer was not 200, too large or not the
    // layout, the file is missing) -> kUnavailable; a failed refetch keeps
    // the list held. A missing or empty identifier or signature ->
    // kBadSignature without a fetch.
    //
    // Thread-safe. No lock is held across a fetch: a verification by a key
    // already held never waits for one; those that need the list a fetch in
    // progress will bring wait for it (at most fetch_timeout) instead of
    // fetching again. Never throws.
    SignatureVerdict verify(std::string_view key_identifier, std::string_view signature_base64,
                            std::string_view body);

    uint64_t fetches() const;          // attempts, failed ones included: for tests and /metrics
    uint64_t fetch_failures() const;   // of those, the ones that brought no list
    // Why the last failed attempt failed ("http: status 500", "timeout",
    // "file: ...", "the list is not JSON", ...), "" if none has; never any of
    // the answer's text.
    std::string last_fetch_error() const;

private:
    // identifier -> the key, decoded once per fetch; null for a key that is
    // not P-256 (its signatures are bad ones, not an unknown key's)
    using KeyMap = std::map<std::string, std::shared_ptr<const EcdsaP256PublicKey>, std::less<>>;

    std::shared_ptr<const KeyMap> keys_for(std::string_view key_identifier);
    bool load(KeyMap &out, std::string &error) const noexcept;
    int64_t now_ms() const;

    const GithubKeysOptions options_;
    mutable std::mutex mu_;
    std::condition_variable fetch_done_;
    std::shared_ptr<const KeyMap> keys_;  // null until a fetch brought a list
    bool fetching_ = false;
    bool attempted_ = false;
    int64_t last_attempt_ms_ = 0;
    uint64_t fetches_ = 0;
    uint64_t failures_ = 0;
    std::string last_error_;
};

}  // namespace keyauth
