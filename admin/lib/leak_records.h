// A key reported as leaked (DESIGN, *Leaked keys revoke themselves*): who
// reported it, where it was found, and whether the report revoked it. Kept
// by keyauthd's store alone (table reported_leaks, never mirrored), so that
// the console can say why a key stopped, and read by account: one range.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ids.h"

namespace keyauth {

// Bounds of what a report carries (the store refuses more, kInvalid).
inline constexpr size_t kMaxLeakUrlBytes = 2048;
inline constexpr size_t kMaxLeakSourceBytes = 64;

struct KeyLeak {
    int64_t at_ms = 0;
    std::string source;  // "github", or who reported it through the admin API or keyauthctl
    std::string url;     // where the secret was found ("" when not said)
    bool revoked = false;  // the report revoked the key (false: --leak-action notify)
};

// reported_leaks' key: account ++ key id.
std::string key_leak_key(const Id &account, const Id &key);
std::string encode_key_leak(const KeyLeak &leak);
std::optional<KeyLeak> decode_key_leak(std::string_view value);
// {source, url (null when not said), reportedAt, revoked}: the key object's "leak".
nlohmann::json key_leak_to_json(const KeyLeak &leak);

}  // namespace keyauth
