#include "etcd_keyspace.h"

namespace keyauth {
namespace {

constexpr std::string_view kLastSegment = "last";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

bool valid_etcd_prefix(std::string_view prefix, std::string &error) {
    if (prefix.size() < 2 || prefix.size() > 129 || prefix.front() != '/' || prefix.back() == '/') {
        error = "the etcd prefix must be \"/\" and 1 to 128 more characters, not ending in \"/\"";
        return false;
    }
    for (char c : prefix) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '/' || c == '-';
        if (!ok) {
            error = "the etcd prefix may hold only letters, digits and . _ / -";
            return false;
        }
    }
    return true;
}

std::string hex_encode(std::string_view bytes) {
    static const char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char c : bytes) {
        out += kDigits[c >> 4];
        out += kDigits[c & 15];
    }
    return out;
}

bool hex_decode(std::string_view hex, std::string &out) {
    if (hex.size() % 2 != 0) return false;
    out.clear();
    out.reserve(hex.size() / 2);
    for (size_t i = 0; i < hex.size(); i += 2) {
        int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
        if (hi < 0 || lo < 0) return false;
        out += static_cast<char>(hi << 4 | lo);
    }
    return true;
}

std::string etcd_table_prefix(std::string_view prefix, Table table) {
    std::string k(prefix);
    k += '/';
    k += table_name(table);
    k += '/';
    return k;
}

std::string etcd_record_key(std::string_view prefix, Table table, std::string_view key) {
    return etcd_table_prefix(prefix, table) + hex_encode(key);
}

std::string etcd_last_key_record(std::string_view prefix, Table table) {
    std::string k(prefix);
    k += '/';
    k += kLastSegment;
    k += '/';
    k += table_name(table);
    return k;
}

std::optional<EtcdRecordName> parse_etcd_record_key(std::string_view prefix,
                                                    std::string_view etcd_key) {
    if (etcd_key.size() <= prefix.size() + 1 || etcd_key.substr(0, prefix.size()) != prefix ||
        etcd_key[prefix.size()] != '/')
        return std::nullopt;
    std::string_view rest = etcd_key.substr(prefix.size() + 1);
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    std::optional<Table> table = table_named(rest.substr(0, slash));
    if (!table) return std::nullopt;
    std::string_view hex = rest.substr(slash + 1);
    EtcdRecordName name{*table, {}};
    if (hex.empty() || !hex_decode(hex, name.key)) return std::nullopt;
    return name;
}

}  // namespace keyauth
