// The verify API's request body: never a crash; an accepted body's views lie
// inside it and hold what the parser promised; a refusal names a field and
// says why in text that the JSON error layout can carry as it is.
#include <cstring>

#include "keyauth_core.h"
#include "verify_request.h"

namespace {

bool inside(ka_str_t s, const char *data, size_t size) {
    return s.data >= data && s.len <= size && s.data + s.len <= data + size;
}

bool plain(const char *text, size_t cap) {
    const size_t n = strnlen(text, cap);
    if (n == cap) return false;
    for (size_t i = 0; i < n; i++) {
        if (text[i] == '"' || text[i] == '\\' || static_cast<unsigned char>(text[i]) < 0x20) return false;
    }
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *body = reinterpret_cast<const char *>(data);
    ka_verify_request_t r;
    if (keyauth::parse_verify_request(std::string_view(body, size), r)) {
        if (r.key.len == 0 || !inside(r.key, body, size) || r.n_scopes > KA_VERIFY_MAX_SCOPES ||
            r.cost > KA_QUOTA_MAX_COST) {
            __builtin_trap();
        }
        for (size_t i = 0; i < r.n_scopes; i++) {
            if (!inside(r.scopes[i], body, size) || !ka_required_scope_ok(r.scopes[i].data, r.scopes[i].len)) {
                __builtin_trap();
            }
        }
        if (r.client != nullptr && r.client->sa_family != AF_INET && r.client->sa_family != AF_INET6) {
            __builtin_trap();
        }
    } else if (r.field[0] == '\0' || r.error[0] == '\0' || !plain(r.field, sizeof r.field) ||
               !plain(r.error, sizeof r.error)) {
        __builtin_trap();
    }
    return 0;
}
