#include "spent_batch.h"

#include <cstring>

#include "le.h"

namespace keyauth {

void append_spent(std::string &batch, const SpentEntry &e) {
    if (batch.empty()) batch.push_back(static_cast<char>(kSpentBatchVersion));
    unsigned char b[kSpentEntryBytes];
    std::memcpy(b, e.id, KA_ID_LEN);
    store_le<uint32_t>(b + KA_ID_LEN, e.spent);
    store_le<uint32_t>(b + KA_ID_LEN + 4, e.rate_per_minute);
    batch.append(reinterpret_cast<const char *>(b), sizeof(b));
}

bool spent_batch_valid(std::string_view batch) noexcept {
    if (batch.size() < 1 + kSpentEntryBytes ||
        static_cast<unsigned char>(batch[0]) != kSpentBatchVersion ||
        (batch.size() - 1) % kSpentEntryBytes != 0 ||
        (batch.size() - 1) / kSpentEntryBytes > kSpentBatchMaxKeys) {
        return false;
    }
    for (size_t at = 1; at < batch.size(); at += kSpentEntryBytes) {
        const auto *p = reinterpret_cast<const unsigned char *>(batch.data() + at);
        if (load_le<uint32_t>(p + KA_ID_LEN) == 0 || load_le<uint32_t>(p + KA_ID_LEN + 4) == 0) {
            return false;
        }
    }
    return true;
}

SpentEntry spent_entry_at(std::string_view batch, size_t i) noexcept {
    const auto *p = reinterpret_cast<const unsigned char *>(batch.data() + 1 + i * kSpentEntryBytes);
    SpentEntry e;
    std::memcpy(e.id, p, KA_ID_LEN);
    e.spent = load_le<uint32_t>(p + KA_ID_LEN);
    e.rate_per_minute = load_le<uint32_t>(p + KA_ID_LEN + 4);
    return e;
}

}  // namespace keyauth
