#include "rfc3339.h"

#include <cstdio>
#include <ctime>

namespace keyauth {
namespace {

// Reads exactly n digits at text[pos].
bool digits(std::string_view text, size_t &pos, size_t n, int64_t &out) {
    if (pos + n > text.size()) return false;
    out = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[pos + i];
        if (c < '0' || c > '9') return false;
        out = out * 10 + (c - '0');
    }
    pos += n;
    return true;
}

bool expect(std::string_view text, size_t &pos, char a, char b = 0) {
    if (pos >= text.size() || (text[pos] != a && (b == 0 || text[pos] != b))) return false;
    pos++;
    return true;
}

}  // namespace

std::string format_time(int64_t ms) {
    time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm {};
    if (ms < 0 || gmtime_r(&secs, &tm) == nullptr) return "1970-01-01T00:00:00.000Z";  // never stored
    char buf[64];
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             static_cast<int>(ms % 1000));
    return buf;
}

std::optional<int64_t> parse_time(std::string_view text) noexcept {
    if (text.size() > 64) return std::nullopt;
    size_t pos = 0;
    int64_t year, month, day, hour, minute, second;
    if (!digits(text, pos, 4, year) || !expect(text, pos, '-') || !digits(text, pos, 2, month) ||
        !expect(text, pos, '-') || !digits(text, pos, 2, day) || !expect(text, pos, 'T', 't') ||
        !digits(text, pos, 2, hour) || !expect(text, pos, ':') || !digits(text, pos, 2, minute) ||
        !expect(text, pos, ':') || !digits(text, pos, 2, second)) {
        return std::nullopt;
    }
    if (year < 1970 || hour > 23 || minute > 59 || second > 59) return std::nullopt;
    int64_t millis = 0;
    if (pos < text.size() && text[pos] == '.') {
        pos++;
        size_t start = pos;
        int64_t scale = 100;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
            millis += (text[pos] - '0') * scale;
            scale /= 10;
            pos++;
        }
        if (pos == start || pos - start > 9) return std::nullopt;
    }
    int64_t offset_minutes = 0;
    if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
        pos++;
    } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
        const int sign = text[pos] == '-' ? -1 : 1;
        pos++;
        int64_t oh, om;
        if (!digits(text, pos, 2, oh) || !expect(text, pos, ':') || !digits(text, pos, 2, om) ||
            oh > 23 || om > 59) {
            return std::nullopt;
        }
        offset_minutes = sign * (oh * 60 + om);
    } else {
        return std::nullopt;
    }
    if (pos != text.size()) return std::nullopt;
    // glibc's timegm does the calendar; it also normalises (February 30th
    // becomes March 2nd), so a date is taken only if it comes back unchanged.
    struct tm tm {};
    tm.tm_year = static_cast<int>(year - 1900);
    tm.tm_mon = static_cast<int>(month - 1);
    tm.tm_mday = static_cast<int>(day);
    const time_t midnight = timegm(&tm);
    if (midnight == static_cast<time_t>(-1) || tm.tm_year != year - 1900 ||
        tm.tm_mon != month - 1 || tm.tm_mday != day) {
        return std::nullopt;
    }
    const int64_t seconds = static_cast<int64_t>(midnight) + hour * 3600 + minute * 60 + second -
                            offset_minutes * 60;
    if (seconds < 0) return std::nullopt;
    return seconds * 1000 + millis;
}

}  // namespace keyauth
