// What GitHub's secret scanning partner program POSTs to
// /v1/secret-scanning/github, and what it is answered (issue #47): the body
// is a JSON array of {"token", "type", "url", "source"} (only "token" is
// required), the answer an array of feedback labels, one per token, with
// the token's SHA-256 instead of the token.
//
// The body is untrusted until its signature is checked, and the tokens in it
// are live secrets: nothing here ever puts any part of a token into an error
// text (errors name the entry by its position and the member by its name).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace keyauth {

inline constexpr size_t kMaxLeakReportBytes = 1 << 20;  // 1 MiB
inline constexpr size_t kMaxLeakReportTokens = 1000;
// A token of any format we issue is far shorter; the others bound what a
// report may make us keep and log (type and source are short names).
inline constexpr size_t kMaxReportedTokenBytes = 256;
inline constexpr size_t kMaxReportedUrlBytes = 2048;
inline constexpr size_t kMaxReportedNameBytes = 128;  // type, source
// GitHub's entries nest two levels; members we do not know may hold more.
inline constexpr int kMaxLeakReportDepth = 32;

struct ReportedToken {
    std::string token;
    std::string type;    // the name the token's format was registered under
    std::string url;     // where it was found (a commit, an issue, ...)
    std::string source;  // what kind of place that is ("commit", "npm", ...)
};

enum class LeakReportStatus {
    kOk,
    kMalformed,  // 400
    kTooLarge,   // 413: over kMaxLeakReportBytes or kMaxLeakReportTokens
};

struct LeakReport {
    LeakReportStatus status = LeakReportStatus::kOk;
    // A short sentence when status is not kOk, e.g. "entry 3: token is not a
    // string" (entry 1 is the first). Never any part of a token.
    std::string error;
    std::vector<ReportedToken> tokens;  // in the body's order; only when kOk
};

// The body as received (the same bytes the signature covers). kOk: every
// entry is an object with a non-empty string "token"; "type", "url" and
// "source" are strings when present (absent or null: ""); other members are
// ignored. kMalformed: not JSON (or not UTF-8), not an array, an entry not an
// object, a bad token, a known member of another type, a string over its
// bound, a member name repeated within one object (strict_json.h), nesting
// over kMaxLeakReportDepth. kTooLarge: checked before anything is built,
// from the size and then by counting the array's entries as they are read.
// Never throws (out of memory reads as kMalformed).
LeakReport parse_leak_report(std::string_view body) noexcept;

struct LeakFeedback {
    std::string token_hash_hex;  // token_sha256_hex of the reported token
    std::string token_type;      // the report's "type", or ours for the format
    bool true_positive = false;  // a token we issued
};

// The partner program's feedback array:
//   [{"token_hash": "...", "token_type": "...", "label": "true_positive"|"false_positive"}, ...]
// Bytes that are not UTF-8 in a text are replaced (U+FFFD), never thrown on.
std::string leak_feedback_json(const std::vector<LeakFeedback> &feedback);

// Lowercase hex of the token's SHA-256: how the feedback names a token.
std::string token_sha256_hex(std::string_view token);

}  // namespace keyauth
