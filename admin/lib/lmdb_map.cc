#include "lmdb_map.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "store_error.h"

namespace keyauth {
namespace {

// Longer than any one request's transaction: a hold kept past it is a bug
// (a thread remapping under its own read), better an error than a hang.
constexpr std::chrono::seconds kRemapWait(10);

std::string mib(size_t bytes) {
    const size_t m = bytes >> 20;
    return std::to_string(m != 0 || bytes == 0 ? m : 1) + " MiB";  // never "0 MiB" for a partial one
}

void remap(MDB_env *env, size_t size, const std::string &path) {
    if (int rc = mdb_env_set_mapsize(env, size); rc != 0) {
        throw std::runtime_error("cannot remap the store at " + path + ": mdb_env_set_mapsize: " +
                                 mdb_strerror(rc));
    }
}

}  // namespace

std::unique_lock<std::shared_timed_mutex> LmdbMap::alone() {
    std::unique_lock<std::shared_timed_mutex> lock(mu_, std::defer_lock);
    if (!lock.try_lock_for(kRemapWait)) {
        throw StoreError(StoreError::Kind::kBusy, "",
                         "the store's map could not be resized while other requests read it; "
                         "nothing was written, retry");
    }
    return lock;
}

size_t LmdbMap::size() const {
    MDB_envinfo info;
    mdb_env_info(env_, &info);
    return info.me_mapsize;
}

size_t LmdbMap::disk_room() const {
    // The file grows only as pages are written, so the map may reach what
    // it holds now plus what the file system has left for it.
    struct stat st;
    struct statvfs fs;
    const std::string data = path_ + "/data.mdb";
    if (::stat(data.c_str(), &st) != 0 || ::statvfs(path_.c_str(), &fs) != 0) {
        throw std::runtime_error("cannot measure the room for the store at " + path_ + ": " +
                                 std::strerror(errno));
    }
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t bytes = static_cast<size_t>(st.st_size) + static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
    return bytes / page * page;
}

void LmdbMap::grow(size_t filled) {
    auto lock = alone();
    const size_t now = size();
    if (now > filled) return;  // two writers filled it in turn: it doubles once
    const size_t disk = disk_room();
    const bool limited = limit_ != 0 && limit_ < disk;
    const size_t bound = limited ? limit_ : disk;
    const size_t next = std::min(now > SIZE_MAX / 2 ? SIZE_MAX : now * 2, bound);
    if (next <= now) {
        throw MapFullError("the store at " + path_ + " is full: its map is " + mib(now) +
                           " and cannot grow (" +
                           (limited ? "this process may map " + mib(limit_) + " at most"
                                    : "the disk holding it has room for " + mib(disk) + " in all") +
                           "); free space on that disk, or move the store to a larger one and "
                           "open it with --map-size MIB above " + mib(now));
    }
    remap(env_, next, path_);
}

void LmdbMap::adopt() {
    auto lock = alone();
    remap(env_, 0, path_);
}

}  // namespace keyauth
