// Where edges exchange quota use in etcd (many-edge mode, issue 28):
//   "<prefix>/quota/<subject byte hex><id hex>/<edge id hex>" -> quota use v1
// (what that edge's nginx workers charged to the subject's quota in one
// period: the period's tag and the units, from the edge's quota ledger,
// src/core/quota_ledger.h). Every edge's keyauth-syncd puts its own and sums
// the other edges' into its ledger; keyauthd sums them all. One range over
// "<prefix>/quota/<subject><id>" holds every edge's use of one subject, one
// over "<prefix>/quota/" the whole fleet's.
//
// "quota" sorts after every table name (the last mirrored one is "plans"),
// and keyauth-syncd's watch ends before it (record_changes.h's
// watched_end): an edge never mirrors, nor is woken by, this exchange.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ids.h"
#include "keyauth_schema.h"
#include "quota_ledger.h"

namespace keyauth {

// The value: layout version (1), a zero byte, the period tag (LE16), the
// units used (LE64, at most 2^48 - 1).
inline constexpr uint8_t kQuotaUseVersion = 1;
inline constexpr size_t kQuotaUseSize = 12;

struct QuotaUse {
    uint16_t tag = 0;
    uint64_t used = 0;
    bool operator==(const QuotaUse &o) const { return tag == o.tag && used == o.used; }
    bool operator!=(const QuotaUse &o) const { return !(*this == o); }
};

std::string encode_quota_use(const QuotaUse &use);
// False for any other size or layout version.
bool decode_quota_use(std::string_view bytes, QuotaUse &out);

// "<prefix>/quota/": every quota key starts with it.
std::string etcd_quota_prefix(std::string_view prefix);
std::string etcd_quota_subject_prefix(std::string_view prefix, QuotaSubject subject, const Id &id);
std::string etcd_quota_key(std::string_view prefix, QuotaSubject subject, const Id &id,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);

struct QuotaKeyName {
    QuotaSubject subject = QuotaSubject::kKey;
    Id id{};
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
};
// The subject and edge of a key under `quota_prefix` (etcd_quota_prefix's);
// false if it is not one (an unknown subject, malformed hex, a stranger).
bool parse_etcd_quota_key(std::string_view quota_prefix, std::string_view etcd_key, QuotaKeyName &out);

}  // namespace keyauth
