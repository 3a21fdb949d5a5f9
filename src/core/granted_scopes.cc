// The scopes an accepted key grants, as the verify API answers them: the
// packed (u8 length, bytes) entries of its record rendered as a JSON array.
// Scopes are [a-z0-9_.-:*] (scope.h), so no byte needs an escape.
#include <cstring>

#include "keyauth_core.h"

extern "C" size_t ka_auth_scopes_json(const ka_auth_result_t *auth, char *out, size_t out_len) {
    const auto *p = reinterpret_cast<const unsigned char *>(auth->granted_scopes.data);
    const size_t len = auth->granted_scopes.len;
    size_t at = 0;
    // writes only what fits; counts everything, so a short buffer learns
    // the length it needs
    auto put = [&](const void *bytes, size_t n) {
        if (out != nullptr && at + n <= out_len) std::memcpy(out + at, bytes, n);
        at += n;
    };
    put("[", 1);
    for (size_t i = 0, n = 0; i < len && n < auth->granted_scope_count; n++) {
        const size_t entry = p[i];
        if (entry == 0 || i + 1 + entry > len) break;  // a decoded record tiles exactly
        if (n) put(",", 1);
        put("\"", 1);
        put(p + i + 1, entry);
        put("\"", 1);
        i += 1 + entry;
    }
    put("]", 1);
    return at;
}
