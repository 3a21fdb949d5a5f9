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

#include <string>
#include <string_view>

#include "ids.h"
#include "keyauth_schema.h"

namespace keyauth {

// "<prefix>/usage/": every usage key starts with it.
std::string etcd_usage_prefix(std::string_view prefix);
std::string etcd_usage_account_prefix(std::string_view prefix, const Id &account);
std::string etcd_usage_key(std::string_view prefix, const Id &account, const Id &key,
                           const unsigned char edge_id[KA_USAGE_EDGE_ID_LEN]);
// The key id of a usage key under `account_prefix`; false if it is not one.
bool parse_etcd_usage_key(std::string_view account_prefix, std::string_view etcd_key, Id &key);

}  // namespace keyauth
