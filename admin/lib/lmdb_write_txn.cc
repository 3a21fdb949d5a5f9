#include "lmdb_write_txn.h"

#include <lmdb++.h>

#include "store_error.h"

namespace keyauth {

WriteTxn::WriteTxn(MDB_env *env, std::chrono::milliseconds wait_limit) {
    const auto asked = std::chrono::steady_clock::now();
    int rc = mdb_txn_begin(env, nullptr, 0, &txn_);
    if (rc != 0) lmdb::error::raise("mdb_txn_begin", rc);
    if (wait_limit.count() > 0 && std::chrono::steady_clock::now() - asked > wait_limit) {
        mdb_txn_abort(txn_);
        txn_ = nullptr;
        throw StoreError(StoreError::Kind::kBusy, "",
                         "another writer held the store too long; nothing was written, retry");
    }
}

WriteTxn::~WriteTxn() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
}

void WriteTxn::commit() {
    MDB_txn *txn = txn_;
    txn_ = nullptr;
    int rc = mdb_txn_commit(txn);
    if (rc != 0) lmdb::error::raise("mdb_txn_commit", rc);
}

}  // namespace keyauth
