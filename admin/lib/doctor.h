// keyauthctl doctor: checks a store directory the way nginx workers and
// keyauthd will use it (schema, permissions, a given worker user's access,
// map usage) without changing anything.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace keyauth {

struct Finding {
    enum class Level { kOk, kWarn, kFail };
    Level level;
    std::string message;
};

std::vector<Finding> diagnose(const std::string &path, const std::optional<std::string> &user);

}  // namespace keyauth
