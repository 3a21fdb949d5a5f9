#include "usage_keyspace.h"

#include <cstdio>
#include <cstring>

#include "civil_date.h"
#include "etcd_codec.h"
#include "etcd_keyspace.h"

namespace keyauth {
namespace {

std::string_view bytes(const unsigned char *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n);
}

constexpr size_t kIdHex = 2 * KA_ID_LEN, kEdgeHex = 2 * KA_USAGE_EDGE_ID_LEN;

size_t period_digits(Granularity g) { return g == Granularity::kHour ? 10 : 8; }

// The period a text of period_digits(g) digits names; false if it is not
// exactly the text etcd_usage_period_text makes.
bool parse_period_text(Granularity g, std::string_view text, uint32_t &period) {
    if (text.size() != period_digits(g)) return false;
    for (char c : text) {
        if (c < '0' || c > '9') return false;
    }
    auto num = [&](size_t at, size_t n) {
        unsigned v = 0;
        for (size_t i = at; i < at + n; i++) v = v * 10 + static_cast<unsigned>(text[i] - '0');
        return v;
    };
    const unsigned y = num(0, 4), m = num(4, 2), d = num(6, 2), h = g == Granularity::kHour ? num(8, 2) : 0;
    if (y < 1970 || m < 1 || m > 12 || d < 1 || d > 31 || h > 23) return false;
    const int64_t days = days_from_civil(y, m, d);
    const int64_t p = g == Granularity::kHour ? days * 24 + h : days;
    if (p < 0 || p > etcd_usage_last_period(g)) return false;
    period = static_cast<uint32_t>(p);
    return etcd_usage_period_text(g, period) == text;  // 31 February is not a day
}

}  // namespace

std::string etcd_usage_prefix(std::string_view prefix) {
    return std::string(prefix) + "/usage/";
}

std::string etcd_usage_account_prefix(std::string_view prefix, const Id &account) {
    return etcd_usage_prefix(prefix) + hex_encode(bytes(account.data(), account.size()));
}

std::string etcd_usage_key(std::string_view prefix, const Id &account, const Id &key,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]) {
    return etcd_usage_account_prefix(prefix, account) + hex_encode(bytes(key.data(), key.size())) +
           "/" + hex_encode(bytes(edge_id, KA_USAGE_EDGE_ID_LEN));
}

bool parse_etcd_usage_key(std::string_view account_prefix, std::string_view etcd_key, Id &key) {
    constexpr size_t kKeyHex = 2 * KA_ID_LEN, kEdgeHex = 2 * KA_USAGE_EDGE_ID_LEN;
    if (etcd_key.size() != account_prefix.size() + kKeyHex + 1 + kEdgeHex ||
        etcd_key.substr(0, account_prefix.size()) != account_prefix ||
        etcd_key[account_prefix.size() + kKeyHex] != '/') {
        return false;
    }
    std::string raw, edge;
    if (!hex_decode(etcd_key.substr(account_prefix.size(), kKeyHex), raw) ||
        !hex_decode(etcd_key.substr(account_prefix.size() + kKeyHex + 1), edge)) {
        return false;
    }
    std::memcpy(key.data(), raw.data(), KA_ID_LEN);
    return true;
}

std::string etcd_usage_bucket_prefix(std::string_view prefix, Granularity g) {
    return std::string(prefix) + (g == Granularity::kHour ? "/usage_hours/" : "/usage_days/");
}

uint32_t etcd_usage_last_period(Granularity g) {
    const int64_t last_day = days_from_civil(9999, 12, 31);
    return static_cast<uint32_t>(g == Granularity::kHour ? last_day * 24 + 23 : last_day);
}

std::string etcd_usage_period_text(Granularity g, uint32_t period) {
    if (period > etcd_usage_last_period(g)) return {};
    const int64_t days = g == Granularity::kHour ? period / 24 : period;
    int64_t y = 0;
    unsigned m = 0, d = 0;
    civil_from_days(days, y, m, d);
    char out[48];
    if (g == Granularity::kHour) {
        std::snprintf(out, sizeof(out), "%04u%02u%02u%02u", static_cast<unsigned>(y), m, d, period % 24);
    } else {
        std::snprintf(out, sizeof(out), "%04u%02u%02u", static_cast<unsigned>(y), m, d);
    }
    return out;
}

std::string etcd_usage_period_prefix(std::string_view prefix, Granularity g, uint32_t period) {
    const std::string table = etcd_usage_bucket_prefix(prefix, g);
    if (period > etcd_usage_last_period(g)) return etcd::prefix_range_end(table);
    return table + etcd_usage_period_text(g, period) + "/";
}

std::string etcd_usage_bucket_account_prefix(std::string_view prefix, Granularity g, uint32_t period,
                                             const Id &account) {
    return etcd_usage_period_prefix(prefix, g, period) + hex_encode(bytes(account.data(), account.size()));
}

std::string etcd_usage_bucket_key_prefix(std::string_view prefix, Granularity g, uint32_t period,
                                         const Id &account, const Id &key) {
    return etcd_usage_bucket_account_prefix(prefix, g, period, account) +
           hex_encode(bytes(key.data(), key.size())) + "/";
}

std::string etcd_usage_bucket_key(std::string_view prefix, Granularity g, uint32_t period, const Id &account,
                                  const Id &key, const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]) {
    return etcd_usage_bucket_key_prefix(prefix, g, period, account, key) +
           hex_encode(bytes(edge_id, KA_USAGE_EDGE_ID_LEN));
}

bool parse_etcd_usage_bucket_key(std::string_view bucket_prefix, Granularity g, std::string_view etcd_key,
                                 UsageBucketName &out) {
    const size_t digits = period_digits(g);
    if (etcd_key.size() != bucket_prefix.size() + digits + 1 + 2 * kIdHex + 1 + kEdgeHex ||
        etcd_key.substr(0, bucket_prefix.size()) != bucket_prefix) {
        return false;
    }
    std::string_view rest = etcd_key.substr(bucket_prefix.size());
    if (rest[digits] != '/' || rest[digits + 1 + 2 * kIdHex] != '/' ||
        !parse_period_text(g, rest.substr(0, digits), out.period)) {
        return false;
    }
    std::string account, key, edge;
    if (!hex_decode(rest.substr(digits + 1, kIdHex), account) ||
        !hex_decode(rest.substr(digits + 1 + kIdHex, kIdHex), key) ||
        !hex_decode(rest.substr(digits + 2 + 2 * kIdHex), edge)) {
        return false;
    }
    std::memcpy(out.account.data(), account.data(), KA_ID_LEN);
    std::memcpy(out.key.data(), key.data(), KA_ID_LEN);
    std::memcpy(out.edge_id, edge.data(), KA_USAGE_EDGE_ID_LEN);
    return true;
}

std::string etcd_usage_mark_key(std::string_view prefix, const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]) {
    return std::string(prefix) + "/usage_marks/" + hex_encode(bytes(edge_id, KA_USAGE_EDGE_ID_LEN));
}

std::string encode_usage_mark(uint32_t hour, uint32_t day) {
    return std::to_string(hour) + " " + std::to_string(day);
}

namespace {

// 1 to 10 decimal digits of a u32.
bool decimal_u32(std::string_view s, uint32_t &out) {
    if (s.empty() || s.size() > 10) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > UINT32_MAX) return false;
    out = static_cast<uint32_t>(v);
    return true;
}

}  // namespace

bool decode_usage_mark(std::string_view value, uint32_t &hour, uint32_t &day) {
    const size_t space = value.find(' ');
    if (space == std::string_view::npos) return false;
    return decimal_u32(value.substr(0, space), hour) && decimal_u32(value.substr(space + 1), day);
}

std::string etcd_usage_history_key(std::string_view prefix) { return std::string(prefix) + "/usage_history"; }

std::string encode_usage_history(uint32_t days) { return std::to_string(days); }

bool decode_usage_history(std::string_view value, uint32_t &days) {
    return decimal_u32(value, days) && days > 0;
}

}  // namespace keyauth
