// The index entries a key record implies, computed in one place for every
// store that keeps them: LMDB's derived tables (lmdb_apply) and the etcd
// backend's index records, which it needs to find a key by id or list an
// account's keys without LMDB.
#pragma once

#include <string>
#include <string_view>

namespace keyauth {

// keys[by_id] and account_keys[by_account] both hold the record's hash.
struct KeyIndex {
    std::string by_id;       // key id
    std::string by_account;  // account id ++ key id
};

// The entries of a key record. Throws StoreError kInvalid for a record that
// does not decode (naming an unknown layout version): its entries cannot be
// computed, so it must not be applied.
KeyIndex key_index_of(std::string_view record);

}  // namespace keyauth
