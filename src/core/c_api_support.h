// What the C API's files (edge_*.cc) share: an error written into the
// caller's buffer, and the caller's lock in the core's terms.
#pragma once

#include <cstdio>
#include <string>

#include "keyauth_core.h"
#include "rate_table.h"

namespace keyauth {

inline void say(char *err, size_t len, const std::string &what) {
    if (len > 0) std::snprintf(err, len, "%s", what.c_str());
}

// The same without a std::string: for catch blocks, where allocating could
// throw again, out of the C API.
inline void say(char *err, size_t len, const char *what, const char *detail = "") noexcept {
    if (len > 0) std::snprintf(err, len, "%s%s", what, detail);
}

inline RateLock lock_of(const ka_lock_t *l) { return RateLock{l->lock, l->unlock, l->data}; }

}  // namespace keyauth
