// The lifecycle's own parsers over arbitrary bytes: RFC 3339 times (every
// expiresAt and --expires-at) and stored audit events (the audit table's
// key and value, as if the store held garbage). A time that parses must
// print and parse back to the same millisecond; an event that decodes must
// encode and decode again.
#include <string>

#include "audit.h"
#include "rfc3339.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    if (auto t = parse_time(in)) {
        auto back = parse_time(format_time(*t));
        if (!back || *back != *t) __builtin_trap();
    }
    if (size >= 24) {
        std::string_view key = in.substr(0, 24), value = in.substr(24);
        if (auto e = decode_audit_record(key, value)) {
            audit_to_json(*e);
            try {
                std::string again = encode_audit_record(*e);
                auto back = decode_audit_record(audit_key(e->account, e->id), again);
                if (!back || back->action != e->action || back->id != e->id) __builtin_trap();
            } catch (const std::invalid_argument &) {
                // re-encoded larger than the bound (escapes grew it): refused, never stored
            }
        }
    }
    return 0;
}
