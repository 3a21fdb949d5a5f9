// Where records live in etcd. The keyspace mirrors LMDB record for record:
// "<prefix>/<db name>/<hex of the LMDB key>" holds the LMDB value bytes (the
// same versioned layouts), so keyauth-syncd can apply what it watches with
// the one LMDB record applier. Lowercase hex keeps LMDB's byte order, so a
// range over a table in etcd is in the order LMDB iterates it.
//
// Beside the tables, the etcd backend keeps records of its own under
// "<prefix>/last/<db name>": the greatest key written to a table, which is
// what a "nothing sorts after" guard compares (an etcd compare names one key,
// never a range). Mirrors skip them: they are not LMDB records.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mutation.h"

namespace keyauth {

inline constexpr std::string_view kDefaultEtcdPrefix = "/keyauth/1";

// A prefix is "/" followed by 1-128 characters of [A-Za-z0-9._/-], not
// ending in "/"; false with a reason otherwise.
bool valid_etcd_prefix(std::string_view prefix, std::string &error);

// "<prefix>/<db name>/": every record of the table, and nothing else, has a
// key that starts with this.
std::string etcd_table_prefix(std::string_view prefix, Table table);
std::string etcd_record_key(std::string_view prefix, Table table, std::string_view key);
std::string etcd_last_key_record(std::string_view prefix, Table table);

struct EtcdRecordName {
    Table table;
    std::string key;  // the LMDB key (bytes)
};

// The table record an etcd key under `prefix` names; none for the backend's
// own records, for a table this build does not know, or for a key that is
// not well formed (odd or upper-case hex, empty).
std::optional<EtcdRecordName> parse_etcd_record_key(std::string_view prefix,
                                                    std::string_view etcd_key);

std::string hex_encode(std::string_view bytes);
// Lowercase hex only; false for anything else.
bool hex_decode(std::string_view hex, std::string &out);

}  // namespace keyauth
