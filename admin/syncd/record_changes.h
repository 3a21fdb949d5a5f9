// What keyauth-syncd applies of what it reads from etcd: the LMDB record
// changes that etcd keys and watch events stand for. Pure functions, no I/O.
//
// Skipped, never applied: keys that name no table record (the etcd backend's
// own "<prefix>/last/..." records, an unknown table, a malformed key), records
// of derived tables (keys, account_keys: the etcd backend keeps them as its
// own index records; LMDB computes them from keys_by_hash when the record is
// applied), and meta names that belong to an environment (schema_version,
// syncd_revision, cluster_id).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd_codec.h"
#include "mutation.h"

namespace keyauth::syncd {

// The change an etcd key stands for: a put with `value`, a delete without;
// none when the key is to be skipped.
std::optional<RecordChange> record_change(std::string_view prefix, std::string_view etcd_key,
                                          std::optional<std::string> value);

// What one watch response or one range page comes to.
struct Batch {
    std::vector<RecordChange> changes;  // in the order etcd sent them
    int64_t revision = 0;  // the highest mod_revision among them, skipped ones included
    size_t read = 0;       // events or key-values read
    size_t skipped = 0;    // of those, how many name nothing to apply
};

Batch batch_of_events(std::string_view prefix, const std::vector<etcd::Event> &events);
Batch batch_of_kvs(std::string_view prefix, const std::vector<etcd::KeyValue> &kvs);

// The ranges a rebuild reads, together every record it applies and nothing
// it would skip: each primary table, and keys_by_hash (the big one) in 256
// ranges by the first byte of the hash. etcd 3.4 walks the whole range for
// every page of a limited read (its index has no limit), so paging through
// millions of keys in one range would cost the square of their number; a
// range of a few thousand keys costs its own size.
std::vector<etcd::RangeRequest> snapshot_ranges(std::string_view prefix);

// The range syncd watches: from the first mirrored table's prefix to the
// end of the last one's. A sibling prefix ("/keyauth/10") stays out, and so
// does what sorts outside them: account_keys (written with every key) and
// the usage edges publish ("<prefix>/usage/", which must not wake every
// edge). What sorts between them and is not mirrored (audit, keys, last) is
// read and skipped.
std::string watched_prefix(std::string_view prefix);
std::string watched_end(std::string_view prefix);

}  // namespace keyauth::syncd
