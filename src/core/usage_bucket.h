// Usage over time (SCHEMA.md, "Usage over time"): one key's counts in one
// UTC hour or day. The edge's collector adds to them (usage_env.h), keyauthd
// and keyauthctl read them back (admin/lib/usage_source.h), keyauth-syncd
// publishes them. Pure data and arithmetic: no I/O here.
#pragma once

#include <cstdint>
#include <string_view>

#include "keyauth_schema.h"

namespace keyauth {

// What one bucket counts.
struct BucketCounts {
    uint64_t allowed = 0;
    uint64_t rate_limited = 0;
    uint64_t quota_exceeded = 0;
    uint64_t units = 0;

    void add(const BucketCounts &o) noexcept {
        allowed += o.allowed;
        rate_limited += o.rate_limited;
        quota_exceeded += o.quota_exceeded;
        units += o.units;
    }
    bool empty() const noexcept {
        return allowed == 0 && rate_limited == 0 && quota_exceeded == 0 && units == 0;
    }
    bool operator==(const BucketCounts &o) const noexcept {
        return allowed == o.allowed && rate_limited == o.rate_limited &&
               quota_exceeded == o.quota_exceeded && units == o.units;
    }
    bool operator!=(const BucketCounts &o) const noexcept { return !(*this == o); }
};

enum class Granularity { kHour, kDay };

inline constexpr int64_t kMsPerHour = 3600 * 1000;
inline constexpr int64_t kMsPerDay = 24 * kMsPerHour;
// Hours are kept 7 days; days 400 by default (keyauth_usage_history).
inline constexpr uint32_t kHourBucketsKept = 7 * 24;
inline constexpr uint32_t kDefaultDayBucketsKept = 400;

inline constexpr int64_t granularity_ms(Granularity g) noexcept {
    return g == Granularity::kHour ? kMsPerHour : kMsPerDay;
}
// The number of the hour (or day) holding Unix ms t since the epoch; t < 0
// is before every bucket and reads as period 0.
inline uint32_t period_of(Granularity g, int64_t t_ms) noexcept {
    return t_ms <= 0 ? 0u : static_cast<uint32_t>(t_ms / granularity_ms(g));
}
inline int64_t period_start_ms(Granularity g, uint32_t period) noexcept {
    return static_cast<int64_t>(period) * granularity_ms(g);
}

// The first period still kept at now_ms: the current one and the
// kHourBucketsKept hours or `days_kept` days before it, less one. The
// edges and keyauth-syncd age out what is older; keyauthd reads it as
// zeros whether or not it was aged out yet.
inline uint32_t first_kept_period(Granularity g, int64_t now_ms, uint32_t days_kept) noexcept {
    const uint32_t kept = g == Granularity::kHour ? kHourBucketsKept : days_kept;
    const uint32_t now = period_of(g, now_ms);
    return now >= kept ? now - kept + 1 : 0;
}

// The LMDB key: period (u32 big-endian: the table is in time order) ++
// account id ++ key id.
void encode_bucket_key(uint32_t period, const unsigned char account[KA_ID_LEN],
                       const unsigned char key[KA_ID_LEN],
                       unsigned char out[KA_USAGE_BUCKET_KEY_LEN]) noexcept;
// The period prefix alone (4 bytes), to seek to the first bucket of a period.
void encode_bucket_period(uint32_t period, unsigned char out[4]) noexcept;
bool decode_bucket_key(std::string_view bytes, uint32_t &period, unsigned char account[KA_ID_LEN],
                       unsigned char key[KA_ID_LEN]) noexcept;

void encode_bucket(const BucketCounts &c, unsigned char out[KA_USAGE_BUCKET_SIZE]) noexcept;
// False for another size or an unknown version (the caller leaves such a
// record as it is and never guesses its counts).
bool decode_bucket(std::string_view bytes, BucketCounts &out) noexcept;

}  // namespace keyauth
