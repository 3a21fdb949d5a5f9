#include "quota_keyspace.h"

#include <cstring>

#include "etcd_keyspace.h"

namespace keyauth {
namespace {

std::string_view bytes(const unsigned char *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n);
}

}  // namespace

std::string encode_quota_use(const QuotaUse &use) {
    std::string out(kQuotaUseSize, '\0');
    out[0] = static_cast<char>(kQuotaUseVersion);
    for (int i = 0; i < 2; i++) out[2 + i] = static_cast<char>((use.tag >> (8 * i)) & 0xff);
    for (int i = 0; i < 8; i++) out[4 + i] = static_cast<char>((use.used >> (8 * i)) & 0xff);
    return out;
}

bool decode_quota_use(std::string_view b, QuotaUse &out) {
    if (b.size() != kQuotaUseSize || static_cast<uint8_t>(b[0]) != kQuotaUseVersion) return false;
    out.tag = 0;
    out.used = 0;
    for (int i = 0; i < 2; i++) out.tag |= static_cast<uint16_t>(static_cast<uint8_t>(b[2 + i]) << (8 * i));
    for (int i = 0; i < 8; i++) out.used |= uint64_t{static_cast<uint8_t>(b[4 + i])} << (8 * i);
    return true;
}

std::string etcd_quota_prefix(std::string_view prefix) {
    return std::string(prefix) + "/quota/";
}

std::string etcd_quota_class_prefix(std::string_view prefix, uint8_t cls, const Id &id) {
    const unsigned char s = cls;
    return etcd_quota_prefix(prefix) + hex_encode(bytes(&s, 1)) + hex_encode(bytes(id.data(), id.size()));
}

std::string etcd_quota_key(std::string_view prefix, uint8_t cls, const Id &id,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]) {
    return etcd_quota_class_prefix(prefix, cls, id) + "/" + hex_encode(bytes(edge_id, KA_USAGE_EDGE_ID_LEN));
}

namespace {

// A class byte quota_slot_class can make, or a subject byte alone.
bool class_ok(uint8_t b) {
    const auto s = static_cast<QuotaSubject>(b & 3);
    if (s != QuotaSubject::kKey && s != QuotaSubject::kAccount) return false;
    if (b == (b & 3)) return true;
    const uint8_t kind = (b >> 2) & 3;
    const uint16_t tag = static_cast<uint16_t>(kind << 14 | ((b >> 4) & 1));
    return kind != KA_QUOTA_NONE && quota_slot_class(s, tag) == b;
}

}  // namespace

bool parse_etcd_quota_key(std::string_view quota_prefix, std::string_view etcd_key, QuotaKeyName &out) {
    constexpr size_t kSubjectHex = 2 + 2 * KA_ID_LEN, kEdgeHex = 2 * KA_USAGE_EDGE_ID_LEN;
    if (etcd_key.size() != quota_prefix.size() + kSubjectHex + 1 + kEdgeHex ||
        etcd_key.substr(0, quota_prefix.size()) != quota_prefix ||
        etcd_key[quota_prefix.size() + kSubjectHex] != '/') {
        return false;
    }
    std::string subject, edge;
    if (!hex_decode(etcd_key.substr(quota_prefix.size(), kSubjectHex), subject) ||
        !hex_decode(etcd_key.substr(quota_prefix.size() + kSubjectHex + 1), edge)) {
        return false;
    }
    const auto b = static_cast<uint8_t>(subject[0]);
    if (!class_ok(b)) return false;
    out.subject = static_cast<QuotaSubject>(b & 3);
    out.cls = b;
    std::memcpy(out.id.data(), subject.data() + 1, KA_ID_LEN);
    std::memcpy(out.edge_id, edge.data(), KA_USAGE_EDGE_ID_LEN);
    return true;
}

}  // namespace keyauth
