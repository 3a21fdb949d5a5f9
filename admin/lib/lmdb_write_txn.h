// A write transaction of an LMDB environment, for every writer (the
// single-host backend, keyauth-syncd). Unlike lmdb::txn, it forgets its
// handle when commit fails: LMDB has already aborted and freed the
// transaction then (MDB_MAP_FULL at commit, for one), and aborting it again
// is a double free.
#pragma once

#include <lmdb.h>

#include <chrono>

namespace keyauth {

class WriteTxn {
public:
    // Waits for the writer lock. With a wait limit, a lock that took longer
    // than that to get is given back and StoreError kBusy thrown: the caller
    // (behind a proxy timeout) may have gone. lmdb::error for LMDB's errors.
    explicit WriteTxn(MDB_env *env, std::chrono::milliseconds wait_limit = std::chrono::milliseconds(0));
    ~WriteTxn();
    WriteTxn(const WriteTxn &) = delete;
    WriteTxn &operator=(const WriteTxn &) = delete;

    MDB_txn *handle() const noexcept { return txn_; }
    void commit();

private:
    MDB_txn *txn_ = nullptr;
};

}  // namespace keyauth
