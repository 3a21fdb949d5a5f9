// Masks keyauth secrets (API keys, console and admin tokens) in text bound for a
// log. nginx itself writes request headers to the error log (every header at
// debug level, a duplicate Authorization line at info level); the module
// routes its error and access logs through this so a secret never reaches
// the disk.
#pragma once

#include <cstddef>

namespace keyauth {

// In place, same length. A secret's head is a prefix NAME and '_' (2 to 10
// of [a-z0-9]: a deployment names its own, and this does not know which),
// each character possibly percent-encoded ("%6Ba%5F..." is a secret in a URL
// too). The base62 run after a head keeps what makes the secret's first 12
// characters (its public display prefix) and every later character becomes
// '*'. "ka_", "kac_" and "kaa_" (the default key head, console and admin
// tokens) count whatever the run's length: a log line cut by its writer
// (nginx's error log stops at 2 KiB and may append "...") can end in any
// part of a secret, and that part must not survive either; "ka_" + a long
// word loses its tail too. Any other NAME counts when the run is a whole
// secret body (32 characters or more) or holds an uppercase letter (a cut
// secret all but always does: its first n characters lack one with
// probability (36/62)^n), so that a word or an id after an underscore
// ("keyauth_zone", "key_0195...") is left alone. A head glued to a word may
// start anywhere in it: the longest NAME is taken, which keeps the fewest
// characters. A "%" or "%X" cut off right after a masked run is masked as
// well. Returns the number of runs that had something masked.
size_t redact_secrets(char *text, size_t len) noexcept;

}  // namespace keyauth
