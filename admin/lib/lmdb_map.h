// The map of one LMDB environment in this process, and growing it when a
// write fills it. LMDB remaps only while this process has no transaction
// open (mdb_env_set_mapsize), and keyauthd opens them from several threads:
// every transaction holds the map shared (hold()) for its whole life, and a
// remap holds it alone. A writer that meets MDB_MAP_FULL ends its
// transaction and its hold, grows the map and runs the write again
// (LmdbBackend); one that meets MDB_MAP_RESIZED (another process grew the
// map past this one's) adopts the new size and begins again.
//
// Growth: the map doubles, bounded by what the disk can hold (data.mdb's
// size plus the file system's free space, statvfs) and by set_limit() when
// one is set; when that leaves no room to grow, MapFullError names the store,
// its map and --map-size.
#pragma once

#include <lmdb.h>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>

namespace keyauth {

// A write the map cannot take, and the map cannot grow for.
class MapFullError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class LmdbMap {
public:
    using Hold = std::shared_lock<std::shared_timed_mutex>;

    LmdbMap(MDB_env *env, std::string path) : env_(env), path_(std::move(path)) {}
    const std::string &path() const noexcept { return path_; }
    LmdbMap(const LmdbMap &) = delete;
    LmdbMap &operator=(const LmdbMap &) = delete;

    // Taken before any transaction of the environment begins, released after it ends.
    Hold hold() { return Hold(mu_); }

    // After MDB_MAP_FULL in a transaction begun with a map of `filled`
    // bytes, with no transaction or hold of this thread left: a larger map
    // (see above; none if another thread has grown it since), or
    // MapFullError. StoreError kBusy when the other threads' transactions
    // keep it from remapping for too long.
    void grow(size_t filled);
    // After MDB_MAP_RESIZED, likewise: the size the store was last written with.
    void adopt();

    // The largest map this process grows to (tests; 0: only the disk bounds it).
    void set_limit(size_t bytes) noexcept { limit_ = bytes; }
    // The map's size in this process (with a hold, or alone).
    size_t size() const;

private:
    std::unique_lock<std::shared_timed_mutex> alone();
    size_t disk_room() const;  // the largest map the disk allows

    MDB_env *env_;
    std::string path_;
    size_t limit_ = 0;
    std::shared_timed_mutex mu_;
};

}  // namespace keyauth
