// Read-only view of the LMDB environment for one nginx worker process: one
// environment, one read transaction that is renewed for each request and
// reset before the request moves on, so no snapshot outlives a request and a
// write committed by keyauthd is visible to the very next request.
#pragma once

#include <lmdb.h>

#include <memory>
#include <string>
#include <string_view>

namespace keyauth {

class EdgeStore {
public:
    ~EdgeStore();
    EdgeStore(const EdgeStore &) = delete;
    EdgeStore &operator=(const EdgeStore &) = delete;

    // Opens PATH (an environment directory) read-only, reclaims reader slots
    // of dead processes and checks the schema version. On failure returns
    // null and says why in err.
    static std::unique_ptr<EdgeStore> open(const std::string &path, std::string &err);

    // A snapshot: begin() renews the transaction, the destructor resets it.
    class Snapshot {
    public:
        explicit Snapshot(EdgeStore &store) noexcept : store_(store) {}
        ~Snapshot() { store_.end(); }
        Snapshot(const Snapshot &) = delete;
        Snapshot &operator=(const Snapshot &) = delete;

        // 0 or an LMDB error code.
        int begin() noexcept { return store_.begin(); }
        // 0 (found), MDB_NOTFOUND or another LMDB error code.
        int get(MDB_dbi dbi, const void *key, size_t len, std::string_view &value) noexcept;

    private:
        EdgeStore &store_;
    };

    MDB_dbi keys_by_hash() const noexcept { return keys_by_hash_; }
    MDB_dbi accounts() const noexcept { return accounts_; }

private:
    EdgeStore() = default;
    int begin() noexcept;
    void end() noexcept;

    MDB_env *env_ = nullptr;
    MDB_txn *txn_ = nullptr;  // reset between requests
    bool active_ = false;
    MDB_dbi keys_by_hash_ = 0;
    MDB_dbi accounts_ = 0;
};

}  // namespace keyauth
