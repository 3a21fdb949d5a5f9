#include "edge_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "keyauth_schema.h"
#include "le.h"

namespace keyauth {
namespace {

// Old and new workers overlap during a reload, and tools read too.
constexpr unsigned kMaxReaders = 1024;

std::string mdb_error(const char *what, int rc) {
    return std::string(what) + ": " + mdb_strerror(rc);
}

// A read transaction; if keyauthd grew the map since it was last looked at,
// adopt the new size and try once more. set_map_failed tells that the
// remap itself failed (LMDB has then dropped the old map).
int begin_read(MDB_env *env, MDB_txn **txn, bool &set_map_failed) noexcept {
    int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, txn);
    if (rc == MDB_MAP_RESIZED) {
        if (mdb_env_set_mapsize(env, 0) != 0) {
            set_map_failed = true;
            return rc;
        }
        rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, txn);
    }
    if (rc != 0) *txn = nullptr;
    return rc;
}

bool file_id(const std::string &path, EdgeStore::FileId &id) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    id = EdgeStore::FileId{static_cast<unsigned long long>(st.st_dev),
                           static_cast<unsigned long long>(st.st_ino)};
    return true;
}

bool file_id_at(int dir, const char *name, EdgeStore::FileId &id) {
    struct stat st;
    if (::fstatat(dir, name, &st, 0) != 0) return false;
    id = EdgeStore::FileId{static_cast<unsigned long long>(st.st_dev),
                           static_cast<unsigned long long>(st.st_ino)};
    return true;
}

}  // namespace

EdgeStore::~EdgeStore() {
    if (txn_ != nullptr) {
        mdb_txn_abort(txn_);
    }
    if (env_ != nullptr) {
        mdb_env_close(env_);
    }
}

// Opens the environment at PATH into env_ and records the identity of the
// files it opened. A rebuild may swap another store in at PATH at any
// instant (renameat2 RENAME_EXCHANGE of the whole directory), and LMDB opens
// lock.mdb and data.mdb one after the other, each by its path name: opened
// by PATH, the two could be two stores' (a reader slot in one lock file,
// pages of the other store: its writer would overwrite them under us), and
// an identity taken by PATH afterwards could be a third store's (stale()
// never true). So LMDB opens them through a descriptor of the directory
// (/proc/self/fd/N names the directory itself, whatever PATH names by
// then), and data.mdb's identity is that of LMDB's own descriptor. A handle
// PATH no longer names when the open ends is made again, a few times: a
// handle made just before a swap would otherwise serve the old store until
// stale() is next asked. 0, or 1 with err set.
int EdgeStore::open_env(const std::string &path, std::string &err) {
    for (int attempt = 1;; attempt++) {
        if (env_ != nullptr) {
            mdb_env_close(env_);
            env_ = nullptr;
        }
        // O_PATH: LMDB's file opens check the permissions, not this one
        const int dir = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0) {
            err = "cannot open \"" + path + "\": " + std::strerror(errno);
            return 1;
        }
        FileId lock_before, lock_after, opened, now;
        // none on a read-only file system, where LMDB reads without a lock file
        const bool had_lock = file_id_at(dir, "lock.mdb", lock_before);
        int rc = mdb_env_create(&env_);
        if (rc != 0) {
            env_ = nullptr;
            ::close(dir);
            err = mdb_error("mdb_env_create", rc);
            return 1;
        }
        mdb_env_set_maxdbs(env_, KA_DB_COUNT);
        mdb_env_set_maxreaders(env_, kMaxReaders);
        const std::string via = "/proc/self/fd/" + std::to_string(dir);
        rc = mdb_env_open(env_, via.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD, 0);
        const bool has_lock = rc == 0 && file_id_at(dir, "lock.mdb", lock_after);
        ::close(dir);
        if (rc != 0) {
            err = mdb_error(("mdb_env_open(\"" + path + "\")").c_str(), rc);
            if (rc == ENOENT && ::access("/proc/self/fd", X_OK) != 0) {
                err += " (it is opened through /proc/self/fd: is /proc mounted?)";
            }
            return 1;
        }
        mdb_filehandle_t fd = -1;
        struct stat st;
        if (mdb_env_get_fd(env_, &fd) != 0 || ::fstat(fd, &st) != 0) {
            err = "\"" + path + "/data.mdb\" cannot be examined: " + std::strerror(errno);
            return 1;
        }
        opened = FileId{static_cast<unsigned long long>(st.st_dev),
                        static_cast<unsigned long long>(st.st_ino)};
        // lock.mdb made or replaced in that directory meanwhile (LMDB makes
        // a missing one): which one LMDB opened is not known
        const bool lock_known = had_lock == has_lock && (!has_lock || lock_before == lock_after);
        const bool current = file_id(path + "/data.mdb", now) && now == opened;
        if (lock_known && (current || attempt >= kOpenAttempts)) {
            // not current after all attempts: a handle of one whole store
            // all the same, which stale() reports
            data_id_ = opened;
            lock_id_ = has_lock ? lock_after : FileId{};
            return 0;
        }
        if (attempt >= kOpenAttempts) {
            err = "lock.mdb of \"" + path + "\" was replaced while it was being opened, " +
                  std::to_string(kOpenAttempts) + " times in a row";
            return 1;
        }
    }
}

std::unique_ptr<EdgeStore> EdgeStore::open(const std::string &path, std::string &err) {
    std::unique_ptr<EdgeStore> s(new EdgeStore());
    if (s->open_env(path, err) != 0) return nullptr;
    int dead = 0;
    mdb_reader_check(s->env_, &dead);
    s->path_ = path;
    s->data_path_ = path + "/data.mdb";
    s->lock_path_ = path + "/lock.mdb";

    MDB_txn *txn = nullptr;
    bool map_failed = false;
    int rc = begin_read(s->env_, &txn, map_failed);
    if (rc != 0) {
        err = mdb_error("mdb_txn_begin", rc);
        return nullptr;
    }
    MDB_dbi &meta = s->meta_;
    const char *missing = nullptr;
    if ((rc = mdb_dbi_open(txn, KA_DB_META, 0, &meta)) != 0) missing = KA_DB_META;
    else if ((rc = mdb_dbi_open(txn, KA_DB_PLANS, 0, &s->plans_)) != 0) missing = KA_DB_PLANS;
    else if ((rc = mdb_dbi_open(txn, KA_DB_ACCOUNTS, 0, &s->accounts_)) != 0)
        missing = KA_DB_ACCOUNTS;
    if (missing != nullptr) {
        mdb_txn_abort(txn);
        err = std::string("database \"") + missing + "\" cannot be opened (" + mdb_strerror(rc) +
              "): not a keyauth environment? create it with keyauthctl";
        return nullptr;
    }
    MDB_val k{sizeof(KA_META_SCHEMA_VERSION) - 1, const_cast<char *>(KA_META_SCHEMA_VERSION)};
    MDB_val v{};
    rc = mdb_get(txn, meta, &k, &v);
    uint32_t version = 0;
    if (rc == 0 && v.mv_size == sizeof(uint32_t)) {
        version = load_le<uint32_t>(static_cast<const unsigned char *>(v.mv_data));
    }
    // The key databases of its schema must be there; those of another schema
    // are opened too if present, and later if a writer upgrades the store.
    for (Table *t : {&s->keys_by_hash_, &s->key_records_, &s->key_slots_}) {
        t->open = mdb_dbi_open(txn, t->name, 0, &t->dbi) == 0;
    }
    // Commit (not abort) so the dbi handles stay valid in the environment.
    mdb_txn_commit(txn);
    if (rc != 0 || version == 0) {
        err = "no valid schema_version in \"meta\": not a keyauth environment?";
        return nullptr;
    }
    if (version < KA_SCHEMA_VERSION_MIN_READ || version > KA_SCHEMA_VERSION) {
        err = "schema version " + std::to_string(version) + " is not supported (this build reads " +
              std::to_string(KA_SCHEMA_VERSION_MIN_READ) + " to " + std::to_string(KA_SCHEMA_VERSION) +
              "); refusing to authenticate";
        return nullptr;
    }
    const Table &needed = version <= 2 && !s->keys_by_hash_.open ? s->keys_by_hash_
                          : version >= 2 && !s->key_slots_.open  ? s->key_slots_
                          : version >= 3 && !s->key_records_.open ? s->key_records_
                                                                  : Table{nullptr};
    if (needed.name != nullptr) {
        err = "schema version " + std::to_string(version) + " without the \"" + needed.name +
              "\" database: the store is damaged; refusing to authenticate";
        return nullptr;
    }
    s->schema_at_open_ = version;
    s->chunks_.resize(kChunkRefs);  // also for schema 1: a writer may upgrade it under us
    rc = begin_read(s->env_, &s->txn_, map_failed);
    if (rc != 0) {
        err = mdb_error("mdb_txn_begin", rc);
        return nullptr;
    }
    mdb_txn_reset(s->txn_);
    return s;
}

const char *EdgeStore::stale() const noexcept {
    if (map_lost_) return "the map could not be grown to the store's new size";
    FileId d, l;
    if (!file_id(data_path_, d) || !(d == data_id_)) return "data.mdb was replaced or removed";
    if (lock_id_.ino != 0 && (!file_id(lock_path_, l) || !(l == lock_id_)))
        return "lock.mdb was replaced or removed";
    return nullptr;
}

bool EdgeStore::newest() const noexcept {
    MDB_envinfo info;
    return mdb_env_info(env_, &info) == 0 && info.me_last_txnid == mdb_txn_id(txn_);
}

int EdgeStore::begin() noexcept {
    if (map_lost_) return MDB_PANIC;
    used_ = true;
    if (active_) {
        if (newest()) return 0;
        mdb_txn_reset(txn_);
        active_ = false;
    }
    int rc = txn_ != nullptr ? mdb_txn_renew(txn_) : MDB_BAD_TXN;
    if (rc != 0) {
        // Start a fresh transaction handle: after MDB_MAP_RESIZED (keyauthd
        // grew the map) with the new size, after any other failure (a reader
        // slot lost, say) because renewing the old one would fail again.
        if (txn_ != nullptr) {
            mdb_txn_abort(txn_);
            txn_ = nullptr;
        }
        if (rc == MDB_MAP_RESIZED && mdb_env_set_mapsize(env_, 0) != 0) {
            map_lost_ = true;
            return MDB_PANIC;
        }
        rc = begin_read(env_, &txn_, map_lost_);
    }
    if (rc == 0 && (rc = adopt_schema()) != 0) {
        mdb_txn_abort(txn_);  // the next begin starts a fresh one
        txn_ = nullptr;
    }
    active_ = rc == 0;
    generation_++;
    return rc;
}

void EdgeStore::release_if_idle() noexcept {
    if (active_ && !used_) {
        mdb_txn_reset(txn_);
        active_ = false;
    }
    used_ = false;
}

int EdgeStore::Snapshot::get(MDB_dbi dbi, const void *key, size_t len,
                             std::string_view &value) noexcept {
    MDB_val k{len, const_cast<void *>(key)};
    MDB_val v{};
    int rc = mdb_get(store_.txn_, dbi, &k, &v);
    if (rc == 0) {
        value = std::string_view(static_cast<const char *>(v.mv_data), v.mv_size);
    }
    return rc;
}

int EdgeStore::open_table(Table &table) noexcept {
    // MDB_NOTLS: a second read transaction of this thread beside txn_
    MDB_txn *txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return rc;
    rc = mdb_dbi_open(txn, table.name, 0, &table.dbi);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    rc = mdb_txn_commit(txn);
    table.open = rc == 0;
    return rc;
}

int EdgeStore::adopt_schema() noexcept {
    for (int attempt = 0;; attempt++) {
        MDB_val k{sizeof(KA_META_SCHEMA_VERSION) - 1, const_cast<char *>(KA_META_SCHEMA_VERSION)};
        MDB_val v{};
        int rc = mdb_get(txn_, meta_, &k, &v);
        if (rc != 0 && rc != MDB_NOTFOUND) return rc;
        const uint32_t schema = rc == 0 && v.mv_size == sizeof(uint32_t)
                                    ? load_le<uint32_t>(static_cast<const unsigned char *>(v.mv_data))
                                    : 0;
        if (schema < KA_SCHEMA_VERSION_MIN_READ || schema > KA_SCHEMA_VERSION) {
            schema_ = 0;
            schema_problem_ = schema == 0 ? ~uint32_t{0} : schema;
            return 0;
        }
        Table *needed[] = {schema >= 3 ? &key_records_ : &keys_by_hash_, schema >= 2 ? &key_slots_ : nullptr};
        bool opened = false;
        for (Table *t : needed) {
            if (t == nullptr || t->open) continue;
            // once for each database in the life of this handle
            if ((rc = open_table(*t)) != 0) return rc;
            opened = true;
        }
        if (!opened || attempt == 2) {
            schema_ = schema;
            schema_problem_ = 0;
            return 0;
        }
        mdb_txn_reset(txn_);
        if ((rc = mdb_txn_renew(txn_)) != 0) return rc;
    }
}

bool EdgeStore::read_layout(Snapshot::KeyLookup &out) noexcept {
    if (layout_generation_ == generation_) return true;
    if (schema_problem_ != 0) {
        out.rc = MDB_INCOMPATIBLE;
        out.where = KA_DB_META;
        out.problem = "has no schema_version this build reads";
        out.version = schema_problem_;
        return false;
    }
    Table &records = schema_ >= 3 ? key_records_ : keys_by_hash_;
    if (!records.open || (schema_ >= 2 && !key_slots_.open)) {
        out.rc = MDB_BAD_DBI;
        out.where = !records.open ? records.name : key_slots_.name;
        return false;
    }
    if (schema_ >= 2) {
        MDB_val hk{sizeof(KA_KEY_SLOTS_HEADER_KEY) - 1, const_cast<char *>(KA_KEY_SLOTS_HEADER_KEY)};
        MDB_val hv{};
        const int rc = mdb_get(txn_, key_slots_.dbi, &hk, &hv);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            out.rc = rc;
            return false;
        }
        const DecodeStatus st = rc == 0 ? decode_key_slots_header(hv.mv_data, hv.mv_size, header_)
                                        : DecodeStatus::kCorrupt;
        // schema 3 has one key a slot and slots naming their key id (v2)
        const uint16_t expected = schema_ >= 3 ? KA_KEY_SLOTS_V2 : KA_KEY_SLOTS_V1;
        if (st != DecodeStatus::kOk || header_.version != expected) {
            out.rc = MDB_CORRUPTED;
            out.version = header_.version;
            out.problem = st == DecodeStatus::kCorrupt ? "has a missing or corrupt header"
                          : st == DecodeStatus::kUnknownVersion ? "has an unknown layout version"
                                                                : "has a layout its schema does not have";
            return false;
        }
    }
    layout_generation_ = generation_;
    return true;
}

const unsigned char *EdgeStore::slots_chunk(uint64_t n) noexcept {
    ChunkRef &ref = chunks_[n % kChunkRefs];
    if (ref.generation == generation_ && ref.n == n) return ref.bytes;
    unsigned char key[4];
    chunk_key(n, key);
    MDB_val k{sizeof key, key};
    MDB_val v{};
    if (mdb_get(txn_, key_slots_.dbi, &k, &v) != 0 || v.mv_size != header_.chunk_bytes()) return nullptr;
    ref = ChunkRef{generation_, n, static_cast<const unsigned char *>(v.mv_data)};
    return ref.bytes;
}

EdgeStore::Snapshot::KeyLookup EdgeStore::Snapshot::find_key(const unsigned char *hash) noexcept {
    KeyLookup out;
    if (!store_.read_layout(out)) return out;
    if (store_.schema_ >= 2) {
        const unsigned char *slot = nullptr;
        switch (find_key_slot(store_.header_, hash, [this](uint64_t n) { return store_.slots_chunk(n); }, slot)) {
        case SlotFind::kAbsent:
            out.rc = MDB_NOTFOUND;
            return out;
        case SlotFind::kInline:
            out.slot = slot;
            return out;
        case SlotFind::kNoChunk:
            out.rc = MDB_CORRUPTED;
            out.problem = "has a missing or torn chunk";
            return out;
        case SlotFind::kInRecord:
            break;
        }
        if (store_.schema_ >= 3) {
            // the record of the slot's key, if its whole hash is this one
            std::string_view value;
            out.where = KA_DB_KEY_RECORDS;
            out.rc = get(store_.key_records_.dbi, slot_key_id(slot), KA_ID_LEN, value);
            if (out.rc == 0 && (value.size() < KA_HASH_LEN || std::memcmp(value.data(), hash, KA_HASH_LEN) != 0))
                out.rc = MDB_NOTFOUND;
            if (out.rc == 0) out.record = value.substr(KA_HASH_LEN);
            return out;
        }
    }
    out.where = KA_DB_KEYS_BY_HASH;
    out.rc = get(store_.keys_by_hash_.dbi, hash, KA_HASH_LEN, out.record);
    return out;
}

int EdgeStore::Snapshot::key_record_by_id(const unsigned char *key_id, std::string_view &record) noexcept {
    KeyLookup layout;
    if (!store_.read_layout(layout)) return layout.rc;
    if (store_.schema_ < 3) return MDB_INCOMPATIBLE;
    std::string_view value;
    const int rc = get(store_.key_records_.dbi, key_id, KA_ID_LEN, value);
    if (rc != 0) return rc;
    if (value.size() < KA_HASH_LEN) return MDB_CORRUPTED;
    record = value.substr(KA_HASH_LEN);
    return 0;
}

}  // namespace keyauth
