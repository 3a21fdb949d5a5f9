// The single-host backend: one LMDB environment, written by keyauthd and
// keyauthctl, read by every nginx worker. A write attempt is one LMDB write
// transaction: its reads see the newest data under the writer lock, so its
// guards hold unless a caller applies a stale mutation; apply checks them,
// applies the records (lmdb_apply.h) and commits with fsync. A write that
// fills the map grows it and runs again (lmdb_map.h); every transaction
// holds the map, so that no thread remaps it under another's.
#pragma once

#include <lmdb++.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lmdb_apply.h"
#include "lmdb_map.h"
#include "store_backend.h"

namespace keyauth {

class LmdbBackend final : public StoreBackend {
public:
    static constexpr size_t kDefaultMapSize = size_t{1} << 32;  // sparse file
    // A new store's modes, whatever the umask. Only the owner (the writer)
    // writes the directory and data.mdb; its group (the nginx workers) reads
    // data.mdb and writes lock.mdb, where LMDB readers take their slot, but
    // cannot create it: the writer does, before LMDB opens. setgid: the files
    // get the directory's group.
    static constexpr mode_t kDirMode = 02750;
    static constexpr mode_t kDataMode = 0640;
    static constexpr mode_t kLockMode = 0660;

    // Opens (creating if needed) the environment directory at path, with a
    // map of at least map_size bytes, and never less than the store was last
    // written with; 0: as written, kDefaultMapSize for a new store. Refuses
    // (StorePermissionError, permissions.h) a store other users can write or
    // this process may not, and (StoreError kCorrupt) another schema version.
    explicit LmdbBackend(const std::string &path, size_t map_size = 0);

    std::unique_ptr<RecordReader> read() override;
    std::unique_ptr<WriteAttempt> begin_write() override;
    void set_write_wait_limit(std::chrono::milliseconds limit) override { wait_limit_ = limit; }
    // One LMDB transaction holds any number; the Store's own cap applies.
    size_t max_keys_per_write() const override { return SIZE_MAX; }
    // One read transaction: the env's info and two databases' entry counts.
    StoreGauges gauges() override;

    // One write transaction of `body`, committed if it returns true, else
    // aborted. A body that fills the map (MDB_MAP_FULL) is run again, in a
    // new transaction, once the map has grown: it must build all its effects
    // in the transaction it is given. MapFullError when the map cannot grow;
    // StoreError (kUnavailable) when another writer has moved the store to
    // another schema since it was opened here (so do read() and
    // begin_write()).
    bool write(const std::function<bool(MDB_txn *)> &body);

    // LMDB gives a write transaction only the pages freed by commits before
    // the last one, so a large write right after another large one cannot
    // reuse the pages that one freed: the file grows by both (ten batches
    // of keys left 957 bytes a key on disk, 724 with this). Called after a
    // commit of `records` records; after a large one, one small commit lets
    // the next write reuse them. Never throws: the write has committed.
    static constexpr size_t kLargeWrite = 1024;
    void release_frees_of(size_t records) noexcept;

    MDB_env *env() noexcept { return env_.handle(); }
    const LmdbTables &tables() const noexcept { return tables_; }
    // Transactions opened on env() directly hold it (map().hold()).
    LmdbMap &map() noexcept { return *map_; }

private:
    // write() without the schema check: the upgrade on open
    bool write_any_schema(const std::function<bool(MDB_txn *)> &body);

    lmdb::env env_;
    std::unique_ptr<LmdbMap> map_;
    LmdbTables tables_;
    std::chrono::milliseconds wait_limit_{0};
};

}  // namespace keyauth
