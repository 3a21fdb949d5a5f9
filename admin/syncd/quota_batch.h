// The "q" field of a keyauth-syncd quota stream entry (quota_redis.h): a
// batch of fixed-size records, one a subject, each this edge's CUMULATIVE
// use of the subject in a period, little endian:
//   subject byte (1 key, 2 account) | id (12) | period tag (u16) | units (u64)
// Cumulative values, never deltas: a record read twice, or a batch
// republished, counts once. Whatever Redis holds is read as untrusted bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"
#include "quota_ledger.h"

namespace keyauth::syncd {

struct QuotaRecord {
    QuotaSubject subject = QuotaSubject::kKey;
    Id id{};
    uint16_t tag = 0;
    uint64_t units = 0;
    bool operator==(const QuotaRecord &o) const {
        return subject == o.subject && id == o.id && tag == o.tag && units == o.units;
    }
};

constexpr size_t kQuotaRecordBytes = 1 + KA_ID_LEN + 2 + 8;
constexpr size_t kMaxQuotaRecords = 1024;       // an entry's
constexpr uint64_t kMaxQuotaUnits = (1ull << 48) - 1;  // what a ledger word holds

// A subject's period class as a map key: the ledger's class byte of the
// subject and the tag (quota_slot_class), then its id (what the quota
// exchange keys its sums by: each class of a subject is counted apart).
std::string subject_key(QuotaSubject subject, const unsigned char *id, uint16_t tag);
inline uint8_t class_of(const std::string &k) { return static_cast<uint8_t>(k[0]); }
inline QuotaSubject subject_of(const std::string &k) {
    return static_cast<QuotaSubject>(static_cast<uint8_t>(k[0]) & 3);
}
Id id_of(const std::string &k);

// Whether `tag` names a period kind and is the period of that kind holding
// now_ms (what both exchanges count; any other period's use is over, or not
// begun).
bool quota_tag_current(uint16_t tag, int64_t now_ms);

// Appends one record.
void append_quota_record(std::string &batch, const QuotaRecord &r);

// The records of `batch` that are well formed, in order, into `out`;
// `skipped` counts the malformed ones (a subject byte other than 1 or 2, a
// tag of no period kind, units above kMaxQuotaUnits). False, with nothing
// taken, when the batch as a whole is malformed: empty, not a whole number
// of records, or more than kMaxQuotaRecords.
bool decode_quota_batch(std::string_view batch, std::vector<QuotaRecord> &out, size_t &skipped);

}  // namespace keyauth::syncd
