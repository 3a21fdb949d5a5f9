// Where edges publish usage in etcd (many-edge mode):
//   "<prefix>/usage/<account hex><key hex>/<edge id hex>" -> usage record v1
// (the cumulative totals of that key on that edge, the bytes of the edge's
// usage env). One range over "<prefix>/usage/<account hex>" holds every
// edge's totals of every key of the account.
//
// "usage" sorts after every table name, and keyauth-syncd's watch ends
// where it begins (usage_watch_end): an edge never mirrors, nor is woken by,
// the usage other edges publish.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ids.h"
#include "keyauth_schema.h"
#include "usage_bucket.h"

namespace keyauth {

// "<prefix>/usage/": every usage key starts with it.
std::string etcd_usage_prefix(std::string_view prefix);
std::string etcd_usage_account_prefix(std::string_view prefix, const Id &account);
std::string etcd_usage_key(std::string_view prefix, const Id &account, const Id &key,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);
// The key id of a usage key under `account_prefix`; false if it is not one.
bool parse_etcd_usage_key(std::string_view account_prefix, std::string_view etcd_key, Id &key);

// ---- Usage over time (issue 29): every edge's hour and day buckets ----
//
//   "<prefix>/usage_hours/<YYYYMMDDHH>/<account hex><key hex>/<edge id hex>"
//   "<prefix>/usage_days/<YYYYMMDD>/<account hex><key hex>/<edge id hex>"
//     -> bucket record v1 (40 bytes, src/core/usage_bucket.h): that edge's
//        counts of that key in that UTC hour or day, as its usage env holds
//        them (cumulative within the bucket: a put repeated or lost is made
//        good by the next one).
//   "<prefix>/usage_marks/<edge id hex>" -> "<hour> <day>" in decimal: the
//        first hour and day that edge's keyauth-syncd still reads (every
//        older bucket of it is published), so a restarted syncd resumes
//        where it stopped instead of republishing its whole history.
//
// Time first, in fixed-width UTC digits, so etcd's byte order is time
// order: keyauthd reads one account's buckets of one period with one small
// range ("<period>/<account hex>"), a whole window of periods for every
// account (the billing export) with one range [from, to), and old buckets
// age out with one DeleteRange of everything before the cutoff: no
// rebuild, no scan.
//
// Where they sort: '_' (0x5f) sorts after '/' and after '0' (0x30), so
// "<prefix>/usage_..." is outside every "<prefix>/usage/..." range the
// totals are read with (that range ends at "<prefix>/usage0"), and, being
// after "plans", outside keyauth-syncd's watch (record_changes.h's
// watched_end) and its rebuild's table ranges: no edge mirrors, or is woken
// by, another edge's buckets.

// "<prefix>/usage_hours/" or "<prefix>/usage_days/": every bucket of g.
std::string etcd_usage_bucket_prefix(std::string_view prefix, Granularity g);
// The last period the keyspace can name (9999-12-31, its last hour); a
// later one has no key.
uint32_t etcd_usage_last_period(Granularity g);
// "YYYYMMDDHH" (hours) or "YYYYMMDD" (days) of a period; empty past
// etcd_usage_last_period.
std::string etcd_usage_period_text(Granularity g, uint32_t period);
// "<bucket prefix><period text>/": every bucket of that period. A period
// past the last one gives the end of the table (prefix_range_end of the
// bucket prefix), so it can bound a range.
std::string etcd_usage_period_prefix(std::string_view prefix, Granularity g, uint32_t period);
// "<period prefix><account hex>" and "...<account hex><key hex>/".
std::string etcd_usage_bucket_account_prefix(std::string_view prefix, Granularity g, uint32_t period,
                                             const Id &account);
std::string etcd_usage_bucket_key_prefix(std::string_view prefix, Granularity g, uint32_t period,
                                         const Id &account, const Id &key);
std::string etcd_usage_bucket_key(std::string_view prefix, Granularity g, uint32_t period, const Id &account,
                                  const Id &key, const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);

struct UsageBucketName {
    uint32_t period = 0;
    Id account{};
    Id key{};
    unsigned char edge_id[KA_USAGE_EDGE_ID_LEN] = {};
};
// What a bucket key under `bucket_prefix` (etcd_usage_bucket_prefix's)
// names; false for anything else (a date that does not exist, malformed
// hex, another length).
bool parse_etcd_usage_bucket_key(std::string_view bucket_prefix, Granularity g, std::string_view etcd_key,
                                 UsageBucketName &out);

// "<prefix>/usage_history" -> the days of day buckets etcd keeps, in
// decimal: keyauth-syncd's --usage-history, put with every age-out (every
// edge's syncd; edges are meant to share it), read by keyauthd to clip its
// reads to what is kept. Outside every range above.
std::string etcd_usage_history_key(std::string_view prefix);
std::string encode_usage_history(uint32_t days);
// False for anything but 1 to 10 decimal digits of a positive u32.
bool decode_usage_history(std::string_view value, uint32_t &days);

// "<prefix>/usage_marks/<edge id hex>" and its value.
std::string etcd_usage_mark_key(std::string_view prefix, const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);
std::string encode_usage_mark(uint32_t hour, uint32_t day);
bool decode_usage_mark(std::string_view value, uint32_t &hour, uint32_t &day);

}  // namespace keyauth
