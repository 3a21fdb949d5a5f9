// What one nginx worker process holds for the edge: the LMDB reader, the
// keys and accounts read in its snapshot and the rendered plan catalog. Internal to
// the core; the glue sees only the opaque ka_edge_t of keyauth_core.h.
#pragma once

#include <memory>

#include "catalog.h"
#include "edge_store.h"
#include "keyauth_core.h"
#include "keyauth_schema.h"
#include "records.h"
#include "sha256.h"
#include "snapshot_cache.h"

namespace keyauth {

// What the edge needs of an account: whether it is active, its effective
// rate and quota (its plan's where it follows the plan).
struct AccountState {
    uint8_t status = 0;
    uint32_t entitlement_rpm = 0;
    Quota quota;
    // views into the snapshot's map, like the cached keys'
    std::string_view allowed_ips;  // packed (ip_allowlist.h); empty: any address
    // for the who-is-calling variables and the verify answer (key_details.cc),
    // which then read no account record
    std::string_view plan_id;
    std::string_view meta;
};

// Keys by SHA-256 digest (decoded views into the snapshot's map); accounts
// by id, hashed on the id's last, random bytes.
using KeyCache = SnapshotCache<std::tuple_size<Digest>::value, 0, KeyRecordView>;
using AccountCache = SnapshotCache<KA_ID_LEN, KA_ID_LEN - 2, AccountState>;

}  // namespace keyauth

struct ka_edge_s {
    std::unique_ptr<keyauth::EdgeStore> store;
    keyauth::KeyCache keys;
    keyauth::AccountCache accounts;
    keyauth::CatalogCache catalog;
};
