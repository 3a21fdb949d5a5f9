#include "leak_records.h"

#include "json_record.h"
#include "rfc3339.h"

namespace keyauth {
namespace {
constexpr uint16_t kRecordV1 = 1;
constexpr size_t kMaxJson = 4096;
}  // namespace

std::string key_leak_key(const Id &account, const Id &key) {
    std::string k(reinterpret_cast<const char *>(account.data()), account.size());
    k.append(reinterpret_cast<const char *>(key.data()), key.size());
    return k;
}

std::string encode_key_leak(const KeyLeak &leak) {
    return encode_json_record(kRecordV1,
                              {{"at", leak.at_ms}, {"source", leak.source}, {"url", leak.url}, {"revoked", leak.revoked}});
}

std::optional<KeyLeak> decode_key_leak(std::string_view value) {
    auto body = decode_json_record(kRecordV1, value, kMaxJson);
    if (!body) return std::nullopt;
    const auto at = body->find("at"), source = body->find("source"), url = body->find("url"),
               revoked = body->find("revoked");
    if (at == body->end() || !at->is_number_integer() || source == body->end() || !source->is_string() ||
        url == body->end() || !url->is_string() || revoked == body->end() || !revoked->is_boolean()) {
        return std::nullopt;
    }
    return KeyLeak{at->get<int64_t>(), source->get<std::string>(), url->get<std::string>(), revoked->get<bool>()};
}

nlohmann::json key_leak_to_json(const KeyLeak &leak) {
    return {{"source", leak.source},
            {"url", leak.url.empty() ? nlohmann::json(nullptr) : nlohmann::json(leak.url)},
            {"reportedAt", format_time(leak.at_ms)},
            {"revoked", leak.revoked}};
}

}  // namespace keyauth
