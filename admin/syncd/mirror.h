// The LMDB side of keyauth-syncd: the edge's store as a mirror of etcd.
//
// The store at PATH is the live copy nginx workers read. Its meta holds the
// mirror's mark (syncd_revision, cluster_id: lmdb_schema/SCHEMA.md), written
// in the same write transaction as the records it covers, so a crash never
// skips a revision nor applies one twice.
//
// A rebuild never touches the live copy: it fills a new environment in the
// sibling directory PATH.rebuild (made with the live directory's mode, owner
// and group, so the nginx workers' group can still open it), marks it
// complete, and swaps the two directories with one renameat2(RENAME_EXCHANGE).
// A reader sees the old store or the new one, never an empty or half-built
// one; an nginx worker notices the new inodes of data.mdb and lock.mdb and
// reopens (src/core/edge_store.cc). The old directory is then deleted.
//
// One thread uses a Mirror at a time. A batch that fills the map grows it
// and is applied again (LmdbBackend::write). Errors throw: StoreError when
// apply_records refuses a record (nothing of that batch is applied),
// MapFullError when the map cannot grow (lmdb_map.h), lmdb::error from
// LMDB, std::runtime_error for a file system step.
#pragma once

#include <lmdb.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lmdb_apply.h"
#include "mutation.h"

namespace keyauth {
class LmdbBackend;
}

namespace keyauth::syncd {

// Which change of a batch the store refuses, and why.
struct Refusal {
    size_t index = 0;
    std::string error;
};

// What the store holds: every record of cluster `cluster_id` up to etcd
// revision `revision`.
struct MirrorMark {
    int64_t revision = 0;
    uint64_t cluster_id = 0;
};

class Mirror {
public:
    // Opens the live store at `path` if there is one (PATH/data.mdb exists);
    // never creates one there: a store appears at PATH only as a complete
    // rebuild swapped in. Removes a PATH.rebuild left over by a crash.
    // `map_size` in bytes, 0: as written (LmdbBackend's rules).
    Mirror(std::string path, size_t map_size);
    ~Mirror();
    Mirror(const Mirror &) = delete;
    Mirror &operator=(const Mirror &) = delete;

    const std::string &path() const noexcept { return path_; }
    std::string rebuild_path() const { return path_ + ".rebuild"; }

    // The live store's mark; none without a store, or for a store syncd has
    // not completed (a single-host store, an older one).
    const std::optional<MirrorMark> &mark() const noexcept { return mark_; }

    // Applies one batch and advances syncd_revision to `revision` (never
    // back), in one write transaction. Requires a marked store.
    void apply(const std::vector<RecordChange> &changes, int64_t revision);
    // The first of `changes` the live store refuses on its own (each tried
    // in a transaction that is then aborted: nothing is written); none if
    // every one applies. Names the record a refused batch is stuck on.
    std::optional<Refusal> refused(const std::vector<RecordChange> &changes) const;

    // A new environment being filled beside the live one. Dropped without
    // finish_rebuild, it removes its directory.
    class Rebuild {
    public:
        ~Rebuild();
        Rebuild(const Rebuild &) = delete;
        Rebuild &operator=(const Rebuild &) = delete;
        // Applies one chunk of records in one committed write transaction.
        void add(const std::vector<RecordChange> &changes);
        size_t records() const noexcept { return records_; }
        // As Mirror::refused, in the store being filled.
        std::optional<Refusal> refused(const std::vector<RecordChange> &changes) const;

    private:
        friend class Mirror;
        Rebuild() = default;
        std::string dir_;
        std::unique_ptr<LmdbBackend> store_;  // none for a peer's copy (begin_copy)
        size_t records_ = 0;
        bool done_ = false;
    };

    // Starts a rebuild in rebuild_path(), removing whatever is there first.
    std::unique_ptr<Rebuild> begin_rebuild();
    // Marks the rebuilt store (revision, cluster id), swaps it in for the
    // live one, reopens PATH and deletes the old copy. On a failure before
    // the swap the live store is as it was.
    void finish_rebuild(std::unique_ptr<Rebuild> rebuild, const MirrorMark &mark);

    // A peer's copy of its store (snapshot_fetch.h) to be received beside
    // the live one: rebuild_path() made as begin_rebuild makes it, with no
    // environment opened. copy_file() is where the copy goes, with
    // copy_mode() (the live data.mdb's mode, or a new store's).
    std::unique_ptr<Rebuild> begin_copy();
    std::string copy_file() const { return rebuild_path() + "/data.mdb"; }
    mode_t copy_mode() const;
    // Opens the received copy (its schema must be this build's) and swaps
    // it in as finish_rebuild does, if its own mark is `expected`; false
    // with the reason, the live store as it was, otherwise.
    bool finish_copy(std::unique_ptr<Rebuild> copy, const MirrorMark &expected, std::string &why);

    // The live environment (null without one), for tests and read-only use
    // by the thread that owns the Mirror.
    MDB_env *env() const noexcept;
    const LmdbTables *tables() const noexcept;

private:
    void open_live();
    // rebuild_path(), new and empty, with the live directory's access.
    std::unique_ptr<Rebuild> make_rebuild_dir();
    // Swaps the complete store in rb's directory in for the live one.
    void swap_in(Rebuild &rb);

    std::string path_;
    size_t map_size_;
    std::unique_ptr<LmdbBackend> live_;
    std::optional<MirrorMark> mark_;
};

}  // namespace keyauth::syncd
