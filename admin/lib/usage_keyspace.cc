#include "usage_keyspace.h"

#include <cstring>

#include "etcd_keyspace.h"

namespace keyauth {
namespace {

std::string_view bytes(const unsigned char *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n);
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

}  // namespace keyauth
