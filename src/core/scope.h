// Scopes are "<resource>:<action>". Resource and action are 1-31 characters of
// [a-z0-9_.-]; a granted action of "*" grants every action of its resource
// ("ip:*" grants "ip:read"). There is no resource wildcard: a key is never
// silently granted resources that did not exist when it was made.
#pragma once

#include <string_view>

namespace keyauth {

bool scope_syntax_ok(std::string_view scope) noexcept;

// A required scope is always concrete (no "*"): config parsing rejects others.
bool scope_grants(std::string_view granted, std::string_view required) noexcept;

}  // namespace keyauth
