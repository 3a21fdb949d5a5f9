#include "records.h"

#include <cstring>
#include <stdexcept>

#include "le.h"
#include "scope.h"

namespace keyauth {
namespace {

using F = ka_key_record_v1;
using A = ka_account_record_v1;

const unsigned char *bytes(const void *p) { return static_cast<const unsigned char *>(p); }

std::string_view view(const unsigned char *p, size_t n) {
    return std::string_view(reinterpret_cast<const char *>(p), n);
}

// Walks packed scope entries; returns false if they do not tile `packed`
// exactly into `count` well-formed entries.
template <typename Fn>
bool walk_scopes(std::string_view packed, size_t count, Fn &&fn) {
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        if (off >= packed.size()) {
            return false;
        }
        size_t len = static_cast<unsigned char>(packed[off++]);
        if (len == 0 || len > KA_SCOPE_MAX_LEN || len > packed.size() - off) {
            return false;
        }
        if (fn(packed.substr(off, len))) {
            return true;
        }
        off += len;
    }
    return off == packed.size();
}

void require(bool ok, const char *what) {
    if (!ok) {
        throw std::invalid_argument(what);
    }
}

}  // namespace

bool KeyRecordView::grants(std::string_view required) const noexcept {
    bool granted = false;
    walk_scopes(scopes, scope_count, [&](std::string_view s) {
        granted = scope_grants(s, required);
        return granted;
    });
    return granted;
}

KeyRecord KeyRecordView::to_owned() const {
    KeyRecord r;
    r.status = status;
    r.requested_rpm = requested_rpm;
    std::memcpy(r.key_id.data(), key_id, KA_ID_LEN);
    std::memcpy(r.account_id.data(), account_id, KA_ID_LEN);
    r.created_ms = created_ms;
    r.revoked_ms = revoked_ms;
    r.expires_ms = expires_ms;
    walk_scopes(scopes, scope_count, [&](std::string_view s) {
        r.scopes.emplace_back(s);
        return false;
    });
    r.prefix = std::string(prefix);
    r.name = std::string(name);
    return r;
}

std::string encode_key_record(const KeyRecord &rec) {
    require(rec.status == KA_KEY_ACTIVE || rec.status == KA_KEY_REVOKED, "key status");
    require(rec.scopes.size() <= KA_SCOPES_MAX, "too many scopes");
    require(rec.prefix.size() <= KA_PREFIX_MAX_LEN, "prefix too long");
    require(rec.name.size() <= KA_NAME_MAX_LEN, "name too long");
    std::string packed;
    for (const auto &s : rec.scopes) {
        require(!s.empty() && s.size() <= KA_SCOPE_MAX_LEN, "scope length");
        packed.push_back(static_cast<char>(s.size()));
        packed += s;
    }
    std::string out(KA_KEY_RECORD_HEAD, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(F, version), KA_KEY_RECORD_V1);
    p[offsetof(F, status)] = rec.status;
    p[offsetof(F, scope_count)] = static_cast<unsigned char>(rec.scopes.size());
    store_le<uint32_t>(p + offsetof(F, requested_rpm), rec.requested_rpm);
    std::memcpy(p + offsetof(F, key_id), rec.key_id.data(), KA_ID_LEN);
    std::memcpy(p + offsetof(F, account_id), rec.account_id.data(), KA_ID_LEN);
    store_le<int64_t>(p + offsetof(F, created_ms), rec.created_ms);
    store_le<int64_t>(p + offsetof(F, revoked_ms), rec.revoked_ms);
    store_le<int64_t>(p + offsetof(F, expires_ms), rec.expires_ms);
    store_le<uint16_t>(p + offsetof(F, scopes_bytes), static_cast<uint16_t>(packed.size()));
    p[offsetof(F, prefix_len)] = static_cast<unsigned char>(rec.prefix.size());
    p[offsetof(F, name_len)] = static_cast<unsigned char>(rec.name.size());
    out += packed;
    out += rec.prefix;
    out += rec.name;
    return out;
}

DecodeStatus decode_key_record(const void *data, size_t len, KeyRecordView &out) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    out.version = load_le<uint16_t>(p + offsetof(F, version));
    if (out.version != KA_KEY_RECORD_V1) {
        return DecodeStatus::kUnknownVersion;
    }
    if (len < KA_KEY_RECORD_HEAD) {
        return DecodeStatus::kCorrupt;
    }
    out.status = p[offsetof(F, status)];
    out.scope_count = p[offsetof(F, scope_count)];
    out.requested_rpm = load_le<uint32_t>(p + offsetof(F, requested_rpm));
    out.key_id = p + offsetof(F, key_id);
    out.account_id = p + offsetof(F, account_id);
    out.created_ms = load_le<int64_t>(p + offsetof(F, created_ms));
    out.revoked_ms = load_le<int64_t>(p + offsetof(F, revoked_ms));
    out.expires_ms = load_le<int64_t>(p + offsetof(F, expires_ms));
    size_t scopes_bytes = load_le<uint16_t>(p + offsetof(F, scopes_bytes));
    size_t prefix_len = p[offsetof(F, prefix_len)];
    size_t name_len = p[offsetof(F, name_len)];
    if ((out.status != KA_KEY_ACTIVE && out.status != KA_KEY_REVOKED) ||
        out.scope_count > KA_SCOPES_MAX || prefix_len > KA_PREFIX_MAX_LEN ||
        name_len > KA_NAME_MAX_LEN ||
        len != KA_KEY_RECORD_HEAD + scopes_bytes + prefix_len + name_len) {
        return DecodeStatus::kCorrupt;
    }
    const unsigned char *tail = p + KA_KEY_RECORD_HEAD;
    out.scopes = view(tail, scopes_bytes);
    out.prefix = view(tail + scopes_bytes, prefix_len);
    out.name = view(tail + scopes_bytes + prefix_len, name_len);
    if (!walk_scopes(out.scopes, out.scope_count, [](std::string_view) { return false; })) {
        return DecodeStatus::kCorrupt;
    }
    return DecodeStatus::kOk;
}

std::string encode_account_record(const AccountRecord &rec) {
    require(rec.status == KA_ACCOUNT_ACTIVE || rec.status == KA_ACCOUNT_SUSPENDED,
            "account status");
    require(rec.name.size() <= KA_NAME_MAX_LEN, "name too long");
    std::string out(KA_ACCOUNT_RECORD_HEAD, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(A, version), KA_ACCOUNT_RECORD_V1);
    p[offsetof(A, status)] = rec.status;
    p[offsetof(A, name_len)] = static_cast<unsigned char>(rec.name.size());
    store_le<uint32_t>(p + offsetof(A, entitlement_rpm), rec.entitlement_rpm);
    store_le<int64_t>(p + offsetof(A, created_ms), rec.created_ms);
    out += rec.name;
    return out;
}

DecodeStatus decode_account_record(const void *data, size_t len, AccountRecordView &out) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    out.version = load_le<uint16_t>(p + offsetof(A, version));
    if (out.version != KA_ACCOUNT_RECORD_V1) {
        return DecodeStatus::kUnknownVersion;
    }
    if (len < KA_ACCOUNT_RECORD_HEAD) {
        return DecodeStatus::kCorrupt;
    }
    out.status = p[offsetof(A, status)];
    out.entitlement_rpm = load_le<uint32_t>(p + offsetof(A, entitlement_rpm));
    out.created_ms = load_le<int64_t>(p + offsetof(A, created_ms));
    size_t name_len = p[offsetof(A, name_len)];
    if ((out.status != KA_ACCOUNT_ACTIVE && out.status != KA_ACCOUNT_SUSPENDED) ||
        len != KA_ACCOUNT_RECORD_HEAD + name_len) {
        return DecodeStatus::kCorrupt;
    }
    out.name = view(p + KA_ACCOUNT_RECORD_HEAD, name_len);
    return DecodeStatus::kOk;
}

std::string encode_token_record(const Id &account_id) {
    std::string out(KA_TOKEN_RECORD_SIZE, '\0');
    auto *p = reinterpret_cast<unsigned char *>(out.data());
    store_le<uint16_t>(p + offsetof(ka_token_record_v1, version), KA_TOKEN_RECORD_V1);
    std::memcpy(p + offsetof(ka_token_record_v1, account_id), account_id.data(), KA_ID_LEN);
    return out;
}

DecodeStatus decode_token_record(const void *data, size_t len, Id &account_id) noexcept {
    const unsigned char *p = bytes(data);
    if (len < sizeof(uint16_t)) {
        return DecodeStatus::kCorrupt;
    }
    if (load_le<uint16_t>(p) != KA_TOKEN_RECORD_V1) {
        return DecodeStatus::kUnknownVersion;
    }
    if (len != KA_TOKEN_RECORD_SIZE) {
        return DecodeStatus::kCorrupt;
    }
    std::memcpy(account_id.data(), p + offsetof(ka_token_record_v1, account_id), KA_ID_LEN);
    return DecodeStatus::kOk;
}

}  // namespace keyauth
