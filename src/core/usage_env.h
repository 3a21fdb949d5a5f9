// The edge's usage environment ("<keyauth_db>.usage", SCHEMA.md), written
// by the one nginx worker that collects the shm zone's counts: each
// collection adds its deltas to the keys' cumulative totals in one write
// transaction. Opened with MDB_NOSYNC | MDB_NOMETASYNC: a collection runs
// in the worker's event loop and is not worth an fsync; a power loss (not a
// process crash) may lose the last collections.
#pragma once

#include <lmdb.h>

#include <memory>
#include <string>

#include "keyauth_schema.h"
#include "usage_bucket.h"
#include "usage_table.h"

namespace keyauth {

// Makes the usage directory (mode 02750) if it is missing: the usage env's
// and the quota ledger's home. False with err filled on failure.
bool ensure_usage_dir(const std::string &path, std::string &err);

// Which file a path is (device and inode), to tell when it was replaced.
struct FileId {
    unsigned long long dev = 0, ino = 0;
    bool operator==(const FileId &o) const noexcept { return dev == o.dev && ino == o.ino; }
    bool operator!=(const FileId &o) const noexcept { return !(*this == o); }
};
// False (id unchanged) when the path cannot be examined: gone.
bool file_id_of(const std::string &path, FileId &id) noexcept;

class UsageEnv {
public:
    ~UsageEnv();
    UsageEnv(const UsageEnv &) = delete;
    UsageEnv &operator=(const UsageEnv &) = delete;

    // Opens PATH for writing, making the directory (mode 2750) and the
    // environment (data.mdb 0640, lock.mdb 0660: the readers' group reads it
    // and takes reader slots, only the workers' user writes it) and its
    // random edge id if they are missing. Null with a reason on failure.
    // Day buckets older than `days_kept` days are aged out as hours are
    // after kHourBucketsKept; `days_kept` is recorded in the env's meta
    // (days_kept) for its readers.
    // `map_bytes`: the map to start with (a full one is doubled).
    static std::unique_ptr<UsageEnv> open(const std::string &path, std::string &err,
                                          uint32_t days_kept = kDefaultDayBucketsKept,
                                          size_t map_bytes = kDefaultMapBytes);
    static constexpr size_t kDefaultMapBytes = size_t{1} << 30;

    // Adds n deltas to their keys' totals and each to the hour and day
    // bucket of its counts (bucket_of) in one write transaction, and ages
    // out a bounded number of buckets past their keeping at now_ms. False
    // with a reason if nothing was written (the caller gives them back).
    bool add(const UsageDelta *deltas, size_t n, int64_t now_ms, std::string &err) noexcept;

    // Where a delta's counts are filed: the time of its last counted call
    // (the zone keeps each hour's counts of a key apart, usage_table.h), or
    // now_ms for units alone in a slot with no call (charged after an
    // answer, the call's slot gone meanwhile).
    static int64_t bucket_of(const UsageDelta &d, int64_t now_ms) noexcept {
        return d.last_used_ms > 0 ? d.last_used_ms : now_ms;
    }

    // Ages out, in a write transaction of its own, a bounded number of the
    // buckets past their keeping at now_ms, as add() does: a collection
    // with nothing to add (an idle edge) still does it. Writes nothing when
    // nothing is that old. False with a reason if LMDB refused.
    bool age_out(int64_t now_ms, std::string &err) noexcept;

    const unsigned char *edge_id() const noexcept { return edge_id_; }

    // True when data.mdb or lock.mdb at the path are not the files this
    // handle has open (removed, or another store put there: the recovery
    // docs/RELIABILITY.md gives for a corrupt store): the caller closes it
    // and opens the path anew, rather than write into deleted files.
    bool replaced() const noexcept;

private:
    UsageEnv() = default;
    // One write transaction of add(); an LMDB return code.
    int write(const UsageDelta *deltas, size_t n, int64_t now_ms) noexcept;
    // Both tables' buckets before first_kept_period at now_ms, within budget.
    int age_out_both(MDB_txn *txn, int64_t now_ms, size_t &budget) noexcept;
    MDB_env *env_ = nullptr;
    MDB_dbi usage_ = 0;
    MDB_dbi meta_ = 0;
    MDB_dbi hours_ = 0;
    MDB_dbi days_ = 0;
    uint32_t days_kept_ = kDefaultDayBucketsKept;
    unsigned char edge_id_[KA_USAGE_EDGE_ID_LEN] = {};
    std::string path_;
    FileId data_id_, lock_id_;  // of the files opened
};

}  // namespace keyauth
