#include "accept_header.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace keyauth {
namespace {

std::string_view trim(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
}

bool same_text(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

// The next item of a list separated by `sep`, taken off `rest`.
std::string_view next_item(std::string_view &rest, char sep) {
    const size_t at = rest.find(sep);
    std::string_view item = rest.substr(0, at);
    rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + 1);
    return trim(item);
}

// A media range's q: 1 unless given; a malformed one accepts nothing.
double quality(std::string_view params) {
    double q = 1;
    while (!params.empty()) {
        std::string_view p = next_item(params, ';');
        if (p.size() < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=') continue;
        const std::string value(p.substr(2));
        char *end = nullptr;
        q = std::strtod(value.c_str(), &end);
        if (value.empty() || value.size() > 5 || *end != '\0' || !(q >= 0 && q <= 1)) q = 0;
    }
    return q;
}

}  // namespace

double accept_quality(std::string_view accept, std::string_view type) {
    if (trim(accept).empty()) return 1;
    const size_t slash = type.find('/');
    const std::string_view major = type.substr(0, slash);
    double best = 0;
    while (!accept.empty()) {
        std::string_view range = next_item(accept, ',');
        const size_t semi = range.find(';');
        const std::string_view media = trim(range.substr(0, semi));
        const std::string_view params = semi == std::string_view::npos ? std::string_view() : range.substr(semi + 1);
        const size_t s = media.find('/');
        if (s == std::string_view::npos) continue;
        const bool matches = same_text(media, type) || media == "*/*" ||
                             (media.substr(s) == "/*" && same_text(media.substr(0, s), major));
        if (matches) best = std::max(best, quality(params));
    }
    return best;
}

}  // namespace keyauth
