#include "auth_header.h"

namespace keyauth {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

bool iequals_ascii(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (size_t i = 0; i < a.size(); i++) {
        char x = a[i];
        if (x >= 'A' && x <= 'Z') {
            x = static_cast<char>(x - 'A' + 'a');
        }
        if (x != b[i]) {
            return false;
        }
    }
    return true;
}

}  // namespace

BearerParse parse_bearer(std::string_view header, std::string_view &token) noexcept {
    token = {};
    size_t i = 0;
    while (i < header.size() && is_space(header[i])) {
        i++;
    }
    size_t scheme_start = i;
    while (i < header.size() && !is_space(header[i])) {
        i++;
    }
    if (!iequals_ascii(header.substr(scheme_start, i - scheme_start), "bearer")) {
        return BearerParse::kMissing;
    }
    while (i < header.size() && is_space(header[i])) {
        i++;
    }
    size_t token_start = i;
    while (i < header.size() && !is_space(header[i])) {
        if (static_cast<unsigned char>(header[i]) < 0x20 || header[i] == 0x7f) {
            return BearerParse::kMalformed;
        }
        i++;
    }
    if (i == token_start) {
        return BearerParse::kMissing;
    }
    token = header.substr(token_start, i - token_start);
    while (i < header.size() && is_space(header[i])) {
        i++;
    }
    return i == header.size() ? BearerParse::kFound : BearerParse::kMalformed;
}

}  // namespace keyauth
