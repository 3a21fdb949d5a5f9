// Masks keyauth secrets (API keys and console tokens) in text bound for a
// log. nginx itself writes request headers to the error log (every header at
// debug level, a duplicate Authorization line at info level); the module
// routes its error logs through this so a secret never reaches the disk.
#pragma once

#include <cstddef>

namespace keyauth {

// In place, same length: every "ka_"/"kac_" followed by at least the random
// part of a secret keeps its 12-character display prefix; the rest of the
// base62 run becomes '*'. Returns the number of secrets masked.
size_t redact_secrets(char *text, size_t len) noexcept;

}  // namespace keyauth
