#include "mirror.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb++.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "key_slots_writer.h"
#include "keyauth_schema.h"
#include "le.h"
#include "lmdb_backend.h"
#include "store_error.h"
#include "syncd_log.h"

namespace keyauth::syncd {
namespace {

MDB_val val(std::string_view s) { return MDB_val{s.size(), const_cast<char *>(s.data())}; }

[[noreturn]] void fail(const std::string &what) {
    throw std::runtime_error(what + ": " + std::strerror(errno));
}

void put_u64(MDB_txn *txn, MDB_dbi meta, const char *name, uint64_t value) {
    unsigned char buf[8];
    store_le<uint64_t>(buf, value);
    MDB_val k = val(name), v{sizeof buf, buf};
    lmdb::dbi_put(txn, meta, &k, &v, 0);
}

void write_mark(MDB_txn *txn, const LmdbTables &tables, const MirrorMark &mark) {
    put_u64(txn, tables[Table::kMeta], KA_META_SYNCD_REVISION, static_cast<uint64_t>(mark.revision));
    put_u64(txn, tables[Table::kMeta], KA_META_CLUSTER_ID, mark.cluster_id);
}

std::optional<uint64_t> get_u64(RecordReader &r, const char *name) {
    auto v = r.get(Table::kMeta, name);
    if (!v || v->size() != 8) return std::nullopt;
    return load_le<uint64_t>(reinterpret_cast<const unsigned char *>(v->data()));
}

std::optional<MirrorMark> read_mark(LmdbBackend &store) {
    auto r = store.read();  // follows a map another process grew
    auto revision = get_u64(*r, KA_META_SYNCD_REVISION);
    auto cluster = get_u64(*r, KA_META_CLUSTER_ID);
    if (!revision || !cluster || *revision > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return MirrorMark{static_cast<int64_t>(*revision), *cluster};
}

std::optional<Refusal> first_refused(LmdbBackend &store, const std::vector<RecordChange> &changes) {
    std::optional<Refusal> refusal;
    try {
        store.write([&](MDB_txn *txn) {  // never committed; run again if it fills the map
            refusal.reset();
            for (size_t i = 0; i < changes.size() && !refusal; i++) {
                try {
                    apply_records(txn, store.tables(), {changes[i]}, KeySlots::kDeferred);
                } catch (const StoreError &e) {
                    refusal = Refusal{i, e.what()};
                }
            }
            return false;
        });
    } catch (const StoreError &) {
        return std::nullopt;  // the store itself refuses (its schema moved on): no record to blame
    }
    return refusal;
}

bool exists(const std::string &path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
}

// Gives `target` the owner, group and mode of `model`. A process that may
// not give the owner away (not root) still sets the group, which is what
// the nginx workers' access rests on; a group it cannot set is an error.
void copy_access(const std::string &model, const std::string &target) {
    struct stat m, t;
    if (::stat(model.c_str(), &m) != 0) fail("cannot examine " + model);
    if (::stat(target.c_str(), &t) != 0) fail("cannot examine " + target);
    if (m.st_uid != t.st_uid || m.st_gid != t.st_gid) {
        if (::chown(target.c_str(), m.st_uid, m.st_gid) != 0) {
            if (errno != EPERM || ::chown(target.c_str(), static_cast<uid_t>(-1), m.st_gid) != 0) {
                fail("cannot give " + target + " the group of " + model);
            }
            log_event("rebuild owner kept",
                      {{"path", target},
                       {"wantedUid", m.st_uid},
                       {"reason", "only root may give a file away; group and mode copied"}});
        }
    }
    if (::chmod(target.c_str(), m.st_mode & 07777) != 0) fail("cannot set the mode of " + target);
}

void fsync_dir(const std::string &dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;  // durability only; the swap itself is done
    (void)::fsync(fd);
    ::close(fd);
}

std::string parent_of(const std::string &path) {
    std::filesystem::path p(path);
    std::string parent = p.parent_path().string();
    return parent.empty() ? "." : parent;
}

std::string normalized(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path.empty()) throw std::invalid_argument("the store path is empty");
    return path;
}

void remove_tree(const std::string &dir) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) throw std::runtime_error("cannot remove " + dir + ": " + ec.message());
}

}  // namespace

Mirror::Mirror(std::string path, size_t map_size) : path_(normalized(std::move(path))), map_size_(map_size) {
    const std::string leftover = rebuild_path();
    if (exists(leftover)) {
        remove_tree(leftover);
        log_event("rebuild leftover removed", {{"path", leftover}});
    }
    if (exists(path_ + "/data.mdb")) open_live();
}

Mirror::~Mirror() = default;

void Mirror::open_live() {
    live_ = std::make_unique<LmdbBackend>(path_, map_size_);
    mark_ = read_mark(*live_);
}

MDB_env *Mirror::env() const noexcept { return live_ ? live_->env() : nullptr; }
const LmdbTables *Mirror::tables() const noexcept { return live_ ? &live_->tables() : nullptr; }

void Mirror::apply(const std::vector<RecordChange> &changes, int64_t revision) {
    if (!live_ || !mark_) throw std::logic_error("the mirror has no complete store to apply to");
    MirrorMark next = *mark_;
    next.revision = std::max(next.revision, revision);
    live_->write([&](MDB_txn *txn) {  // a map it fills grows, and the batch runs again
        apply_records(txn, live_->tables(), changes);
        write_mark(txn, live_->tables(), next);
        return true;
    });
    mark_ = next;
    live_->release_frees_of(changes.size());
}

std::optional<Refusal> Mirror::refused(const std::vector<RecordChange> &changes) const {
    if (!live_) return std::nullopt;
    return first_refused(*live_, changes);
}

std::optional<Refusal> Mirror::Rebuild::refused(const std::vector<RecordChange> &changes) const {
    return first_refused(*store_, changes);
}

Mirror::Rebuild::~Rebuild() {
    store_.reset();
    if (!done_ && !dir_.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
}

void Mirror::Rebuild::add(const std::vector<RecordChange> &changes) {
    if (changes.empty()) return;
    store_->write([&](MDB_txn *txn) {
        // key_slots is built once, when the last page is in (finish_rebuild)
        apply_records(txn, store_->tables(), changes, KeySlots::kDeferred);
        return true;
    });
    records_ += changes.size();
}

std::unique_ptr<Mirror::Rebuild> Mirror::make_rebuild_dir() {
    std::unique_ptr<Rebuild> rb(new Rebuild());
    const std::string dir = rebuild_path();
    if (exists(dir)) remove_tree(dir);
    if (::mkdir(dir.c_str(), 0700) != 0) fail("cannot create " + dir);
    rb->dir_ = dir;  // from here on, the Rebuild removes it if it is dropped
    struct stat live_dir;
    const bool have_live = ::stat(path_.c_str(), &live_dir) == 0 && S_ISDIR(live_dir.st_mode);
    if (have_live) {
        copy_access(path_, dir);
    } else if (::chmod(dir.c_str(), LmdbBackend::kDirMode) != 0) {  // as for any new store
        fail("cannot set the mode of " + dir);
    }
    return rb;
}

std::unique_ptr<Mirror::Rebuild> Mirror::begin_rebuild() {
    std::unique_ptr<Rebuild> rb = make_rebuild_dir();
    const std::string &dir = rb->dir_;
    // Never a smaller map than the live store's: its records must fit.
    size_t map_size = map_size_;
    if (live_) {
        MDB_envinfo info;
        mdb_env_info(live_->env(), &info);
        map_size = std::max(map_size, static_cast<size_t>(info.me_mapsize));
    }
    rb->store_ = std::make_unique<LmdbBackend>(dir, map_size);
    // Nobody reads the rebuild until it is swapped in, and a crash leaves a
    // leftover that is removed, never used: its page-sized commits need no
    // fsync each (a thousand of them a million keys), only one before the swap.
    if (int rc = mdb_env_set_flags(rb->store_->env(), MDB_NOSYNC, 1); rc != 0) {
        fail(std::string("cannot set MDB_NOSYNC on the rebuild: ") + mdb_strerror(rc));
    }
    for (const char *file : {"/data.mdb", "/lock.mdb"}) {
        if (exists(path_ + file)) copy_access(path_ + file, dir + file);
    }
    return rb;
}

void Mirror::finish_rebuild(std::unique_ptr<Rebuild> rb, const MirrorMark &mark) {
    rb->store_->write([&](MDB_txn *txn) {
        const LmdbTables &t = rb->store_->tables();
        rebuild_key_slots(txn, t.key_records, t.key_slots);
        write_mark(txn, t, mark);
        return true;
    });
    // the new store is complete on disk before it is swapped in
    if (int rc = mdb_env_sync(rb->store_->env(), 1); rc != 0) {
        fail(std::string("cannot sync the rebuilt store: ") + mdb_strerror(rc));
    }
    rb->store_.reset();  // closed before it becomes the live store
    swap_in(*rb);
}

std::unique_ptr<Mirror::Rebuild> Mirror::begin_copy() { return make_rebuild_dir(); }

mode_t Mirror::copy_mode() const {
    struct stat st;
    if (::stat((path_ + "/data.mdb").c_str(), &st) == 0) return st.st_mode & 07777;
    return LmdbBackend::kDataMode;
}

bool Mirror::finish_copy(std::unique_ptr<Rebuild> rb, const MirrorMark &expected, std::string &why) {
    const std::string file = rb->dir_ + "/data.mdb";
    if (exists(path_ + "/data.mdb")) copy_access(path_ + "/data.mdb", file);
    std::optional<MirrorMark> mark;
    try {
        LmdbBackend copy(rb->dir_, map_size_);  // refuses another schema version
        mark = read_mark(copy);
        if (int rc = mdb_env_sync(copy.env(), 1); rc != 0) {
            fail(std::string("cannot sync the copy: ") + mdb_strerror(rc));
        }
    } catch (const std::exception &e) {
        why = std::string("the copy cannot be opened: ") + e.what();
        return false;
    }
    if (!mark || mark->revision != expected.revision || mark->cluster_id != expected.cluster_id) {
        why = "the copy's own mark is not the one its head announced";
        return false;
    }
    if (exists(path_ + "/lock.mdb")) copy_access(path_ + "/lock.mdb", rb->dir_ + "/lock.mdb");
    swap_in(*rb);
    return true;
}

void Mirror::swap_in(Rebuild &rebuild) {
    Rebuild *rb = &rebuild;
    if (exists(path_)) {
        // Both directories stay whole: PATH names the new store from this
        // instant, PATH.rebuild the old one.
        if (::renameat2(AT_FDCWD, rb->dir_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
            fail("cannot swap " + rb->dir_ + " with " + path_ +
                 " (renameat2 RENAME_EXCHANGE; the file system must support it)");
        }
    } else if (::rename(rb->dir_.c_str(), path_.c_str()) != 0) {
        fail("cannot rename " + rb->dir_ + " to " + path_);
    }
    fsync_dir(parent_of(path_));
    rb->done_ = true;  // the old store, if any, is now at rebuild_path()

    live_.reset();
    mark_.reset();
    open_live();
    std::error_code ec;
    std::filesystem::remove_all(rebuild_path(), ec);
    if (ec) {
        log_event("old store not removed", {{"path", rebuild_path()}, {"error", ec.message()}});
    }
}

}  // namespace keyauth::syncd
