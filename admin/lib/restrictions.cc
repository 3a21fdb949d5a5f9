#include "restrictions.h"

#include "ip_allowlist.h"
#include "keyauth_schema.h"
#include "store_error.h"

namespace keyauth {

std::string allowed_ips_from_texts(const std::vector<std::string> &texts, const char *field) {
    std::string packed, error;
    if (!pack_allowed_ips(texts, packed, error))
        throw StoreError(StoreError::Kind::kInvalid, field, std::string(field) + " " + error);
    return packed;
}

std::string allowed_ips_from_json(const nlohmann::json &value, const char *field) {
    if (value.is_null()) return "";
    const std::string expect = std::string(field) + " must be null (any address) or an array of CIDR strings";
    if (!value.is_array()) throw StoreError(StoreError::Kind::kInvalid, field, expect);
    std::vector<std::string> texts;
    for (const auto &v : value) {
        if (!v.is_string()) throw StoreError(StoreError::Kind::kInvalid, field, expect);
        texts.push_back(v.get<std::string>());
    }
    return allowed_ips_from_texts(texts, field);
}

nlohmann::json allowed_ips_to_json(std::string_view packed) {
    return packed.empty() ? nlohmann::json(nullptr) : nlohmann::json(allowed_ips_text(packed));
}

std::string meta_from_json(const nlohmann::json &value, const char *field) {
    if (value.is_null()) return "";
    if (!value.is_object())
        throw StoreError(StoreError::Kind::kInvalid, field, std::string(field) + " must be null or a JSON object");
    std::string text = value.dump();  // parsed from UTF-8 text, so it dumps as UTF-8
    if (text.size() > KA_META_MAX_BYTES) {
        throw StoreError(StoreError::Kind::kInvalid, field,
                         std::string(field) + " is " + std::to_string(text.size()) + " bytes as compact JSON; at most " +
                             std::to_string(KA_META_MAX_BYTES));
    }
    return text;
}

nlohmann::json meta_to_json(std::string_view stored) {
    if (stored.empty()) return nullptr;
    // written by meta_from_json; a record that holds anything else reads as none
    nlohmann::json j = nlohmann::json::parse(stored.begin(), stored.end(), nullptr, false);
    return j.is_object() ? j : nlohmann::json(nullptr);
}

}  // namespace keyauth
