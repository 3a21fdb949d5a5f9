// The "q" field of a quota stream entry, as anyone who can write to the
// Redis stream may hold it (keyauth-syncd --quota-redis): through the parser
// the transport uses. Never a crash; a batch either is refused whole or
// yields records that are each well formed and, encoded again, give back
// the very bytes they came from.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quota_batch.h"

using namespace keyauth;
using namespace keyauth::syncd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::vector<QuotaRecord> records;
    size_t skipped = 0;
    if (!decode_quota_batch(in, records, skipped)) {
        if (!records.empty() || skipped != 0) __builtin_trap();
        return 0;
    }
    if (records.size() + skipped != size / kQuotaRecordBytes) __builtin_trap();
    std::string again;
    for (const QuotaRecord &r : records) {
        const uint8_t kind = static_cast<uint8_t>(r.tag >> 14);
        if (r.units > kMaxQuotaUnits || kind == 0 ||
            (r.subject != QuotaSubject::kKey && r.subject != QuotaSubject::kAccount)) {
            __builtin_trap();
        }
        append_quota_record(again, r);
    }
    // every record taken is found, byte for byte, in the input
    if (skipped == 0 && again != in) __builtin_trap();
    return 0;
}
