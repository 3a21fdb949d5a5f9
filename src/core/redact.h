// Masks keyauth secrets (API keys and console tokens) in text bound for a
// log. nginx itself writes request headers to the error log (every header at
// debug level, a duplicate Authorization line at info level); the module
// routes its error and access logs through this so a secret never reaches
// the disk.
#pragma once

#include <cstddef>

namespace keyauth {

// In place, same length. Wherever "ka_" or "kac_" starts a run of base62
// characters, the run keeps its first 12 characters (a secret's public
// display prefix) and every later character becomes '*', whatever the run's
// length: a log line cut by its writer (nginx's error log stops at 2 KiB and
// may append "...") can end in any part of a secret, and that part must not
// survive either. Characters may be percent-encoded ("%6Ba%5F..." is a secret
// in a URL too); a "%" or "%X" cut off right after a masked run is masked as
// well. Text that only looks like a secret ("ka_" + a long word) loses its
// tail too: a false positive hides some log text, a miss would log a secret.
// Returns the number of runs that had something masked.
size_t redact_secrets(char *text, size_t len) noexcept;

}  // namespace keyauth
