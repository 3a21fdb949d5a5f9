// Where edges exchange quota use in etcd (many-edge mode, issue 28):
//   "<prefix>/quota/<class byte hex><id hex>/<edge id hex>" -> quota use v1
// (what that edge's nginx workers charged to the subject's quota in one
// period: the period's tag and the units, from the edge's quota ledger,
// src/core/quota_ledger.h). The class byte is the ledger's slot class
// (quota_slot_class: the subject, the period kind and, for days and months,
// the parity of the period's number), so each period class of a subject has
// a key of its own (#44: a quota switched to another kind and back finds
// its use); a key whose byte is the subject alone (1 key, 2 account) was
// put by an edge of an earlier build, and holds the class of its tag.
// Every edge's keyauth-syncd puts its own and sums the other edges' into
// its ledger; keyauthd sums them all. One range over
// "<prefix>/quota/<class><id>" holds every edge's use of one subject in one
// class, one over "<prefix>/quota/" the whole fleet's.
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
// cls: a slot class byte (quota_slot_class), or a subject byte alone (an
// earlier build's keys, to read them).
std::string etcd_quota_class_prefix(std::string_view prefix, uint8_t cls, const Id &id);
std::string etcd_quota_key(std::string_view prefix, uint8_t cls, const Id &id,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);

struct QuotaKeyName {
    QuotaSubject subject = QuotaSubject::kKey;
    uint8_t cls = 0;  // as the key names it: a class byte, or the subject alone
    Id id{};
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
};
// The subject, class and edge of a key under `quota_prefix`
// (etcd_quota_prefix's); false if it is not one (an unknown subject or
// class, malformed hex, a stranger).
bool parse_etcd_quota_key(std::string_view quota_prefix, std::string_view etcd_key, QuotaKeyName &out);

}  // namespace keyauth
