#include "url.h"

// Ours rather than curl_easy_unescape: that one passes a bad escape through
// as text and decodes %00 into the middle of a string, where a path or a key
// id must be refused instead.

namespace keyauth {
namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Calls each(name, raw value) for every pair of the query until it returns
// false; a pair without '=' has an empty value. False on an undecodable name.
template <typename Each>
bool each_pair(std::string_view query, Each &&each);

}  // namespace

bool percent_decode(std::string_view in, std::string &out, bool plus_is_space) {
    out.clear();
    out.reserve(in.size());
    for (size_t i = 0; i < in.size(); i++) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= in.size()) return false;
            int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return true;
}

namespace {

template <typename Each>
bool each_pair(std::string_view query, Each &&each) {
    while (!query.empty()) {
        size_t amp = query.find('&');
        std::string_view pair = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
        size_t eq = pair.find('=');
        std::string key;
        if (!percent_decode(pair.substr(0, eq), key, true)) return false;
        if (!each(key, eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1))) break;
    }
    return true;
}

}  // namespace

QueryParam query_param(std::string_view query, std::string_view name, std::string &value) {
    QueryParam found = QueryParam::kAbsent;
    const bool names_ok = each_pair(query, [&](const std::string &key, std::string_view raw) {
        if (key != name) return true;
        found = percent_decode(raw, value, true) ? QueryParam::kFound : QueryParam::kBad;
        return false;
    });
    return names_ok ? found : QueryParam::kBad;
}

bool query_params(std::string_view query, std::vector<std::pair<std::string, std::string>> &out) {
    out.clear();
    bool values_ok = true;
    const bool names_ok = each_pair(query, [&](const std::string &key, std::string_view raw) {
        std::string value;
        values_ok = percent_decode(raw, value, true);
        if (values_ok) out.emplace_back(key, std::move(value));
        return values_ok;
    });
    return names_ok && values_ok;
}

}  // namespace keyauth
