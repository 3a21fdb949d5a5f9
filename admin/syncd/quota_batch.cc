#include "quota_batch.h"

#include <cstring>

#include "quota_period.h"

namespace keyauth::syncd {

bool quota_tag_current(uint16_t tag, int64_t now_ms) {
    const uint8_t kind = static_cast<uint8_t>(tag >> 14);
    if (kind != KA_QUOTA_DAY && kind != KA_QUOTA_MONTH && kind != KA_QUOTA_TOTAL) return false;
    return quota_period_tag(kind, now_ms) == tag;
}

std::string subject_key(QuotaSubject subject, const unsigned char *id, uint16_t tag) {
    std::string k(1, static_cast<char>(quota_slot_class(subject, tag)));
    k.append(reinterpret_cast<const char *>(id), KA_ID_LEN);
    return k;
}

Id id_of(const std::string &k) {
    Id id;
    std::memcpy(id.data(), k.data() + 1, KA_ID_LEN);
    return id;
}

void append_quota_record(std::string &batch, const QuotaRecord &r) {
    char rec[kQuotaRecordBytes];
    rec[0] = static_cast<char>(r.subject);
    std::memcpy(rec + 1, r.id.data(), KA_ID_LEN);
    for (int i = 0; i < 2; i++) rec[1 + KA_ID_LEN + i] = static_cast<char>(r.tag >> (8 * i));
    for (int i = 0; i < 8; i++) rec[3 + KA_ID_LEN + i] = static_cast<char>(r.units >> (8 * i));
    batch.append(rec, sizeof rec);
}

bool decode_quota_batch(std::string_view batch, std::vector<QuotaRecord> &out, size_t &skipped) {
    if (batch.empty() || batch.size() % kQuotaRecordBytes != 0 ||
        batch.size() / kQuotaRecordBytes > kMaxQuotaRecords) {
        return false;
    }
    for (size_t at = 0; at < batch.size(); at += kQuotaRecordBytes) {
        const auto *p = reinterpret_cast<const unsigned char *>(batch.data() + at);
        QuotaRecord r;
        const uint8_t subject = p[0];
        std::memcpy(r.id.data(), p + 1, KA_ID_LEN);
        r.tag = static_cast<uint16_t>(p[1 + KA_ID_LEN] | p[2 + KA_ID_LEN] << 8);
        for (int i = 7; i >= 0; i--) r.units = r.units << 8 | p[3 + KA_ID_LEN + i];
        const uint8_t kind = static_cast<uint8_t>(r.tag >> 14);
        const bool kind_ok = kind == KA_QUOTA_DAY || kind == KA_QUOTA_MONTH || kind == KA_QUOTA_TOTAL;
        if ((subject != 1 && subject != 2) || !kind_ok || r.units > kMaxQuotaUnits) {
            skipped++;
            continue;
        }
        r.subject = static_cast<QuotaSubject>(subject);
        out.push_back(r);
    }
    return true;
}

}  // namespace keyauth::syncd
