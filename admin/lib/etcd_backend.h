// The many-edge backend: the store's records live in an etcd 3.4 cluster,
// keyed as etcd_keyspace.h lays out, and keyauthd/keyauthctl hold no state.
//
// A reader reads at one revision: the first read is linearizable and fixes
// the revision, the others read at it, so every reader (and write attempt)
// sees one consistent snapshot. A write attempt applies its mutation as one
// etcd txn whose compares are the guards: a record read must still have the
// mod_revision it was read with, a new one must still be absent, and a
// "nothing sorts after" guard compares the table's last-key record. The
// txn also writes the index records a key record implies (keys/,
// account_keys/: what finding a key by id and listing an account need) and
// the last-key record, so the Store's business rules run unchanged.
//
// etcd refuses a txn of more than 128 operations or 1.5 MiB: such a write is
// refused before it is sent (StoreError kInvalid), and bulk key creation
// pages itself (max_keys_per_write). etcd unreachable or leaderless:
// StoreError kUnavailable within the client's deadline (5 s a call); a write
// that timed out may have been applied, and its compares keep a replay from
// applying twice.
//
// Thread-safety: readers and write attempts may run on many threads at once;
// each takes an etcd client of its own from a pool for its lifetime.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "etcd_keyspace.h"
#include "store_backend.h"

namespace keyauth {

struct EtcdBackendOptions {
    std::string endpoints;  // "http://a:2379,https://b:2379"
    std::string ca_file, cert_file, key_file;
    std::string prefix{kDefaultEtcdPrefix};
    std::chrono::milliseconds request_timeout{5000};
};

class EtcdBackend final : public StoreBackend {
public:
    // etcd's default limits (--max-txn-ops, --max-request-bytes).
    static constexpr size_t kMaxTxnOps = 128;
    static constexpr size_t kMaxTxnBytes = 1536 * 1024;
    // A new key is a compare and three puts (its record and two index
    // records); 40 of them, plus the account and last-key guards, fit.
    static constexpr size_t kMaxKeysPerWrite = 40;

    // nullptr with a reason for unusable options (no endpoint, a malformed
    // one, a bad prefix). Does not contact etcd.
    static std::unique_ptr<EtcdBackend> make(const EtcdBackendOptions &options, std::string &error);

    std::unique_ptr<RecordReader> read() override;
    std::unique_ptr<WriteAttempt> begin_write() override;
    // Every etcd call has its own deadline; there is no lock to wait for.
    void set_write_wait_limit(std::chrono::milliseconds) override {}
    size_t max_keys_per_write() const override { return kMaxKeysPerWrite; }

    const std::string &prefix() const noexcept { return prefix_; }

    // The pool of clients the readers borrow; public for the readers only.
    class ClientPool;

private:
    EtcdBackend(std::shared_ptr<ClientPool> pool, std::string prefix);
    std::shared_ptr<ClientPool> pool_;
    std::string prefix_;
};

}  // namespace keyauth
