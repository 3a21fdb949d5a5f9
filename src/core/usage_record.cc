#include "usage_record.h"

#include <algorithm>
#include <cstring>

#include "le.h"

namespace keyauth {

void UsageTotals::add(const UsageTotals &other) noexcept {
    allowed += other.allowed;
    rate_limited += other.rate_limited;
    last_used_ms = std::max(last_used_ms, other.last_used_ms);
}

void encode_usage_record(const UsageTotals &t, unsigned char out[KA_USAGE_RECORD_SIZE]) noexcept {
    std::memset(out, 0, KA_USAGE_RECORD_SIZE);
    store_le<uint16_t>(out, KA_USAGE_RECORD_V1);
    store_le<uint64_t>(out + offsetof(ka_usage_record_v1, allowed), t.allowed);
    store_le<uint64_t>(out + offsetof(ka_usage_record_v1, rate_limited), t.rate_limited);
    store_le<int64_t>(out + offsetof(ka_usage_record_v1, last_used_ms), t.last_used_ms);
}

bool decode_usage_record(std::string_view bytes, UsageTotals &out) noexcept {
    if (bytes.size() != KA_USAGE_RECORD_SIZE) return false;
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    if (load_le<uint16_t>(p) != KA_USAGE_RECORD_V1) return false;
    out.allowed = load_le<uint64_t>(p + offsetof(ka_usage_record_v1, allowed));
    out.rate_limited = load_le<uint64_t>(p + offsetof(ka_usage_record_v1, rate_limited));
    out.last_used_ms = load_le<int64_t>(p + offsetof(ka_usage_record_v1, last_used_ms));
    return true;
}

}  // namespace keyauth
