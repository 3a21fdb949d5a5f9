#include "edge_store.h"

#include <sys/stat.h>

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

bool file_id(const std::string &path, unsigned long long &dev, unsigned long long &ino) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    dev = st.st_dev;
    ino = st.st_ino;
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

std::unique_ptr<EdgeStore> EdgeStore::open(const std::string &path, std::string &err) {
    std::unique_ptr<EdgeStore> s(new EdgeStore());
    int rc = mdb_env_create(&s->env_);
    if (rc != 0) {
        err = mdb_error("mdb_env_create", rc);
        s->env_ = nullptr;
        return nullptr;
    }
    mdb_env_set_maxdbs(s->env_, KA_DB_COUNT);
    mdb_env_set_maxreaders(s->env_, kMaxReaders);
    rc = mdb_env_open(s->env_, path.c_str(), MDB_RDONLY | MDB_NOTLS | MDB_NORDAHEAD, 0);
    if (rc != 0) {
        err = mdb_error(("mdb_env_open(\"" + path + "\")").c_str(), rc);
        return nullptr;
    }
    int dead = 0;
    mdb_reader_check(s->env_, &dead);

    s->path_ = path;
    if (!file_id(path + "/data.mdb", s->data_id_.dev, s->data_id_.ino)) {
        err = "\"" + path + "/data.mdb\" cannot be examined: " + std::strerror(errno);
        return nullptr;
    }
    // none on a read-only file system, where LMDB reads without a lock file
    (void)file_id(path + "/lock.mdb", s->lock_id_.dev, s->lock_id_.ino);

    MDB_txn *txn = nullptr;
    bool map_failed = false;
    rc = begin_read(s->env_, &txn, map_failed);
    if (rc != 0) {
        err = mdb_error("mdb_txn_begin", rc);
        return nullptr;
    }
    MDB_dbi &meta = s->meta_;
    const char *missing = nullptr;
    if ((rc = mdb_dbi_open(txn, KA_DB_META, 0, &meta)) != 0) missing = KA_DB_META;
    else if ((rc = mdb_dbi_open(txn, KA_DB_PLANS, 0, &s->plans_)) != 0) missing = KA_DB_PLANS;
    else if ((rc = mdb_dbi_open(txn, KA_DB_KEYS_BY_HASH, 0, &s->keys_by_hash_)) != 0)
        missing = KA_DB_KEYS_BY_HASH;
    else if ((rc = mdb_dbi_open(txn, KA_DB_ACCOUNTS, 0, &s->accounts_)) != 0)
        missing = KA_DB_ACCOUNTS;
    const bool slots_db = missing == nullptr && mdb_dbi_open(txn, KA_DB_KEY_SLOTS, 0, &s->key_slots_) == 0;
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
    if (version >= 2 && !slots_db) {
        err = "schema version " + std::to_string(version) + " without the \"" KA_DB_KEY_SLOTS
              "\" database: the store is damaged; refusing to authenticate";
        return nullptr;
    }
    // A store of schema 1 is read through keys_by_hash alone (until a writer
    // upgrades it and this worker reopens the store).
    s->has_key_slots_ = version >= 2;
    if (s->has_key_slots_) s->chunks_.resize(kChunkRefs);
    rc = begin_read(s->env_, &s->txn_, map_failed);
    if (rc != 0) {
        err = mdb_error("mdb_txn_begin", rc);
        return nullptr;
    }
    mdb_txn_reset(s->txn_);
    return s;
}

bool EdgeStore::stale(std::string &why) const noexcept {
    if (map_lost_) {
        why = "the map could not be grown to the store's new size";
        return true;
    }
    FileId d, l;
    if (!file_id(path_ + "/data.mdb", d.dev, d.ino) || d.dev != data_id_.dev ||
        d.ino != data_id_.ino) {
        why = "data.mdb was replaced or removed";
        return true;
    }
    if (lock_id_.ino != 0 && (!file_id(path_ + "/lock.mdb", l.dev, l.ino) ||
                              l.dev != lock_id_.dev || l.ino != lock_id_.ino)) {
        why = "lock.mdb was replaced or removed";
        return true;
    }
    return false;
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

const KeySlotsHeader *EdgeStore::slots_header(Snapshot::KeyLookup &out) noexcept {
    if (header_generation_ != generation_) {
        MDB_val k{sizeof(KA_KEY_SLOTS_HEADER_KEY) - 1, const_cast<char *>(KA_KEY_SLOTS_HEADER_KEY)};
        MDB_val v{};
        int rc = mdb_get(txn_, key_slots_, &k, &v);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            out.rc = rc;
            return nullptr;
        }
        header_status_ = rc == 0 ? decode_key_slots_header(v.mv_data, v.mv_size, header_)
                                 : DecodeStatus::kCorrupt;
        header_generation_ = generation_;
    }
    if (header_status_ == DecodeStatus::kOk) return &header_;
    out.rc = MDB_CORRUPTED;
    out.version = header_.version;
    out.problem = header_status_ == DecodeStatus::kUnknownVersion ? "has an unknown layout version"
                                                                  : "has a missing or corrupt header";
    return nullptr;
}

const unsigned char *EdgeStore::slots_chunk(uint64_t n) noexcept {
    ChunkRef &ref = chunks_[n % kChunkRefs];
    if (ref.generation == generation_ && ref.n == n) return ref.bytes;
    unsigned char key[4];
    chunk_key(n, key);
    MDB_val k{sizeof key, key};
    MDB_val v{};
    if (mdb_get(txn_, key_slots_, &k, &v) != 0 || v.mv_size != header_.chunk_bytes()) return nullptr;
    ref = ChunkRef{generation_, n, static_cast<const unsigned char *>(v.mv_data)};
    return ref.bytes;
}

EdgeStore::Snapshot::KeyLookup EdgeStore::Snapshot::find_key(const unsigned char *hash) noexcept {
    KeyLookup out;
    if (store_.has_key_slots_) {
        const KeySlotsHeader *h = store_.slots_header(out);
        if (h == nullptr) return out;
        const unsigned char *slot = nullptr;
        switch (find_key_slot(*h, hash, [this](uint64_t n) { return store_.slots_chunk(n); }, slot)) {
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
    }
    out.rc = get(store_.keys_by_hash_, hash, KA_HASH_LEN, out.record);
    return out;
}

}  // namespace keyauth
