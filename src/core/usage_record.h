// The usage record (lmdb_schema/keyauth_schema.h, ka_usage_record_v1): one
// key's cumulative totals on one edge. Shared by the edge (which adds to
// it), keyauthd (which reads it) and keyauth-syncd (which publishes it).
#pragma once

#include <cstdint>
#include <string_view>

#include "keyauth_schema.h"

namespace keyauth {

struct UsageTotals {
    uint64_t allowed = 0;
    uint64_t rate_limited = 0;
    int64_t last_used_ms = 0;  // 0: never used

    // Sums counts and keeps the later last use (totals of two edges, or a
    // record and a delta).
    void add(const UsageTotals &other) noexcept;
    bool operator==(const UsageTotals &o) const noexcept {
        return allowed == o.allowed && rate_limited == o.rate_limited &&
               last_used_ms == o.last_used_ms;
    }
    bool operator!=(const UsageTotals &o) const noexcept { return !(*this == o); }
};

void encode_usage_record(const UsageTotals &t, unsigned char out[KA_USAGE_RECORD_SIZE]) noexcept;
// False for a record of another size or an unknown version (fail closed:
// the caller says so, it never guesses).
bool decode_usage_record(std::string_view bytes, UsageTotals &out) noexcept;

}  // namespace keyauth
