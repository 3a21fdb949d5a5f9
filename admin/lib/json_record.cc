#include "json_record.h"

#include "le.h"

namespace keyauth {
namespace {
constexpr size_t kHead = 4;  // u16 version, u16 reserved
}

std::string encode_json_record(uint16_t version, const nlohmann::json &body) {
    std::string out(kHead, '\0');
    store_le<uint16_t>(reinterpret_cast<unsigned char *>(out.data()), version);
    return out + body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<nlohmann::json> decode_json_record(uint16_t version, std::string_view value, size_t max_json) {
    if (value.size() < kHead || value.size() > kHead + max_json ||
        load_le<uint16_t>(reinterpret_cast<const unsigned char *>(value.data())) != version) {
        return std::nullopt;
    }
    nlohmann::json body = nlohmann::json::parse(value.substr(kHead), nullptr, false);
    if (!body.is_object()) return std::nullopt;
    return body;
}

}  // namespace keyauth
