// Where keyauthd reads the usage of keys (usage and lastUsedAt of the key
// object): what the edges collected, at most one collection interval stale
// on one host, plus keyauth-syncd's publishing interval on many edges.
//   - single host: the usage env beside the store ("<--db>.usage"), read-only;
//   - many edges: the sum over every edge's totals in etcd.
// A key nobody has used (or no usage env yet) has zeros and last_used_ms 0
// (lastUsedAt null).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "ids.h"
#include "usage_record.h"

namespace keyauth {

using KeyUsage = UsageTotals;

class UsageSource {
public:
    virtual ~UsageSource() = default;
    // An entry for every key asked for (keys of `account`). Throws
    // StoreError kUnavailable when the source cannot be read now.
    virtual std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) = 0;
};

// Reads PATH (default: the store's path + ".usage") once it exists.
std::unique_ptr<UsageSource> make_lmdb_usage_source(std::string usage_db_path);
// Sums one range read over "<prefix>/usage/<account hex>" per call.
std::unique_ptr<UsageSource> make_etcd_usage_source(etcd::ClientOptions options, std::string prefix);

// What keyauthd wires in: etcd when endpoints are given, else LMDB at
// `db` + ".usage".
std::unique_ptr<UsageSource> make_usage_source(const std::string &db,
                                               const etcd::ClientOptions &etcd,
                                               const std::string &etcd_prefix);

}  // namespace keyauth
