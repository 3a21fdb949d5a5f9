// Read-only view of the LMDB environment for one nginx worker process: one
// environment and one read transaction. A request keeps the transaction of
// the request before it while that is still the newest committed snapshot
// (one compare of transaction ids), and renews it as soon as the writer has
// committed since, so a write by keyauthd is seen by the very next request
// and an unchanged store costs no renew. release() resets the transaction;
// the worker calls it when idle, so an old snapshot never pins pages for long.
#pragma once

#include <lmdb.h>

#include <cerrno>
#include <cstdint>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "key_slots.h"
#include "keyauth_schema.h"

namespace keyauth {

class EdgeStore {
public:
    ~EdgeStore();
    EdgeStore(const EdgeStore &) = delete;
    EdgeStore &operator=(const EdgeStore &) = delete;

    // Opens PATH (an environment directory) read-only, reclaims reader slots
    // of dead processes and checks the schema version. On failure returns
    // null and says why in err. Whenever a rebuild swaps another store in at
    // PATH, the handle holds one store's lock file and data file, never a mix,
    // and stale() compares with the identity of the files it opened; a store
    // swapped in while it is being opened makes the open start again (a few
    // times). Linux: opens through /proc/self/fd.
    static std::unique_ptr<EdgeStore> open(const std::string &path, std::string &err);

    // The reason, when this handle must be closed and the store opened
    // again: its files were replaced or removed (a store made anew at the
    // same path, a rebuild swapped in, or a deleted lock.mdb, which would
    // hide this reader from the writer), or LMDB lost the map when it tried
    // to grow it; null while it is not. Two stat() calls: for a periodic
    // check, not per request. Allocates nothing.
    const char *stale() const noexcept;

    // Identity of a file, to tell when the store was replaced under us.
    struct FileId {
        unsigned long long dev = 0, ino = 0;
        bool operator==(const FileId &o) const noexcept { return dev == o.dev && ino == o.ino; }
    };

    // The newest snapshot, for one request: what it reads stays valid until
    // the next begin() or release(), so nothing is copied out.
    class Snapshot {
    public:
        explicit Snapshot(EdgeStore &store) noexcept : store_(store) {}
        Snapshot(const Snapshot &) = delete;
        Snapshot &operator=(const Snapshot &) = delete;

        // 0 or an LMDB error code.
        int begin() noexcept { return store_.begin(); }
        // Counts the snapshots this store has held: equal numbers, same data.
        uint64_t generation() const noexcept { return store_.generation_; }
        // 0 (found), MDB_NOTFOUND or another LMDB error code.
        int get(MDB_dbi dbi, const void *key, size_t len, std::string_view &value) noexcept;

        // The key of this SHA-256 digest: through key_slots in a store of
        // schema 2 or 3 (one or two cache lines at any size; a slot that
        // holds the key is returned as is); for a key whose fields do not
        // fit a slot, its record (schema 3: key_records by the slot's key
        // id, the whole hash compared; else keys_by_hash by the hash). The
        // layout is read again with every new snapshot, so a store upgraded
        // under an open handle is read as it now is.
        struct KeyLookup {
            int rc = 0;                           // 0, MDB_NOTFOUND, or an LMDB error
            const unsigned char *slot = nullptr;  // found in an INLINE slot
            std::string_view record;              // found in key_records or keys_by_hash
            const char *where = KA_DB_KEY_SLOTS;  // the database of an error or problem
            const char *problem = nullptr;        // the layout cannot be read: why
            unsigned version = 0;                 // of an unknown layout or schema
        };
        KeyLookup find_key(const unsigned char *hash) noexcept;
        // The record of the key with this id (schema 3's key_records, its
        // hash cut off): 0, MDB_NOTFOUND, MDB_INCOMPATIBLE for a store of
        // an older schema (no table by id), or another LMDB error. Off the
        // request path (the quota ledger's sweep).
        int key_record_by_id(const unsigned char *key_id, std::string_view &record) noexcept;
        // Calls fn(key, value) for every entry in key order; stops when fn
        // returns false. 0, ENOMEM if fn threw (it allocates), or an LMDB
        // error code.
        template <typename Fn>
        int scan(MDB_dbi dbi, Fn &&fn) noexcept {
            MDB_cursor *cur = nullptr;
            int rc = mdb_cursor_open(store_.txn_, dbi, &cur);
            if (rc != 0) return rc;
            MDB_val k{}, v{};
            try {
                for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
                     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
                    if (!fn(std::string_view(static_cast<const char *>(k.mv_data), k.mv_size),
                            std::string_view(static_cast<const char *>(v.mv_data), v.mv_size))) {
                        break;
                    }
                }
            } catch (...) {
                rc = ENOMEM;
            }
            mdb_cursor_close(cur);
            return rc == MDB_NOTFOUND ? 0 : rc;
        }

    private:
        EdgeStore &store_;
    };

    MDB_dbi accounts() const noexcept { return accounts_; }
    MDB_dbi plans() const noexcept { return plans_; }
    MDB_dbi meta() const noexcept { return meta_; }
    // The schema version the store had when it was opened.
    uint32_t schema_at_open() const noexcept { return schema_at_open_; }

    // Resets the read transaction if no snapshot was begun since the last
    // call: called once every half second by an idle-worker timer, it lets
    // go of a snapshot within a second of its last use.
    void release_if_idle() noexcept;

private:
    EdgeStore() = default;
    // How many times open() tries when the store is swapped under it.
    static constexpr int kOpenAttempts = 5;
    int open_env(const std::string &path, std::string &err);
    int begin() noexcept;
    bool newest() const noexcept;
    // Reads the new snapshot's schema version, and opens the key databases
    // of that schema this handle has not needed before (a store upgraded
    // since it was opened): a transaction only sees databases opened before
    // it began, so the snapshot is then begun again. 0 or an LMDB error;
    // a schema it cannot read is kept in schema_problem_ for find_key.
    int adopt_schema() noexcept;
    // key_slots' header as this snapshot has it, read once per snapshot;
    // false, with out saying why, when the layout cannot be read. Chunk
    // pointers point into the map and live as long as it.
    bool read_layout(Snapshot::KeyLookup &out) noexcept;
    const unsigned char *slots_chunk(uint64_t n) noexcept;
    struct Table {
        const char *name;
        MDB_dbi dbi = 0;
        bool open = false;
    };
    // Opens a database in a read transaction of its own, whose commit keeps
    // the handle for the environment. 0 or an LMDB error.
    int open_table(Table &table) noexcept;

    MDB_env *env_ = nullptr;
    MDB_txn *txn_ = nullptr;  // reset between requests
    bool active_ = false;     // txn_ holds a snapshot (renewed, not reset)
    bool used_ = false;       // a snapshot was begun since release_if_idle()
    uint64_t generation_ = 0;
    bool map_lost_ = false;   // a failed remap left the environment unusable
    std::string path_;
    std::string data_path_, lock_path_;  // made at open: stale() allocates nothing
    FileId data_id_, lock_id_;  // of the files opened; lock_id_ 0: none
    MDB_dbi accounts_ = 0;
    MDB_dbi plans_ = 0;
    MDB_dbi meta_ = 0;
    Table keys_by_hash_{KA_DB_KEYS_BY_HASH};  // schema 1 and 2
    Table key_records_{KA_DB_KEY_RECORDS};    // schema 3
    Table key_slots_{KA_DB_KEY_SLOTS};        // schema 2 and 3
    uint32_t schema_at_open_ = 0;

    uint32_t schema_ = 0;             // of the current snapshot
    uint32_t schema_problem_ = 0;     // a schema version it does not read (0: none)
    uint64_t layout_generation_ = 0;  // of header_ (0: none read)
    KeySlotsHeader header_;
    struct ChunkRef {
        uint64_t generation = 0;
        uint64_t n = 0;
        const unsigned char *bytes = nullptr;
    };
    // Direct-mapped by chunk number, made at open (never on a request):
    // 16,384 chunks are 16 Mi slots, a store of 10 million keys. A larger
    // store shares entries, and a miss costs one mdb_get.
    static constexpr size_t kChunkRefs = 16384;
    std::vector<ChunkRef> chunks_;
};

}  // namespace keyauth
