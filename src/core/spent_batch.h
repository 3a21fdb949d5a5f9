// The record one edge publishes for keyauth_shared_limits: the requests each
// key spent there since its previous exchange. A Redis stream entry's `s`
// field holds one batch (format in docs/shared-limits.md):
//   byte 0: version (1); then per key 20 bytes: the key's rate id (12),
//   requests spent (u32 LE, >= 1), effective rate per minute (u32 LE, >= 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "keyauth_schema.h"

namespace keyauth {

inline constexpr unsigned char kSpentBatchVersion = 1;
inline constexpr size_t kSpentEntryBytes = KA_ID_LEN + 8;
// keys in one stream entry (20 KiB): a busier edge writes several entries
inline constexpr size_t kSpentBatchMaxKeys = 1024;

struct SpentEntry {
    unsigned char id[KA_ID_LEN];
    uint32_t spent;
    uint32_t rate_per_minute;
};

// Appends one key's entry to a batch (starting it with the version byte).
void append_spent(std::string &batch, const SpentEntry &e);

// Reads a batch without copying; false (and nothing visited) for a batch of
// an unknown version, a torn length or an entry with a zero count or rate.
template <class Visit>
bool read_spent_batch(std::string_view batch, Visit &&visit);

bool spent_batch_valid(std::string_view batch) noexcept;
SpentEntry spent_entry_at(std::string_view batch, size_t i) noexcept;

template <class Visit>
bool read_spent_batch(std::string_view batch, Visit &&visit) {
    if (!spent_batch_valid(batch)) return false;
    const size_t n = (batch.size() - 1) / kSpentEntryBytes;
    for (size_t i = 0; i < n; i++) visit(spent_entry_at(batch, i));
    return true;
}

}  // namespace keyauth
