// RFC 3339 times as the console API and keyauthctl speak them: answers are
// UTC with milliseconds; inputs may carry Z or an offset and any fraction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keyauth {

// 2026-11-21T23:59:01.123Z
std::string format_time(int64_t ms);

// Milliseconds since the epoch of "2026-11-21T23:59:01Z",
// "2026-11-21T23:59:01.5+05:30" and the like (fraction truncated to
// milliseconds); nullopt for anything else, including impossible dates,
// leap seconds, years before 1970 or after 9999, and inputs over 64 bytes.
std::optional<int64_t> parse_time(std::string_view text) noexcept;

}  // namespace keyauth
