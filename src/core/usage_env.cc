#include "usage_env.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "le.h"
#include "usage_record.h"

namespace keyauth {
namespace {

// The map starts at kDefaultMapBytes: sparse, ~100 bytes a key's totals or
// bucket with LMDB's overhead. A full map is doubled, up to kMaxMapSize.
constexpr size_t kMaxMapSize = size_t{1} << 40;
constexpr int kMaxGrowths = 2;  // per collection: a collection adds little
// As the key store's (admin/lib/lmdb_backend.h), with the roles swapped: the
// workers' user writes; the group (keyauthd's, keyauth-syncd's) reads data.mdb
// and takes reader slots in lock.mdb, which it cannot create in 2750.
constexpr mode_t kDirMode = 02750;
constexpr mode_t kDataMode = 0640;
constexpr mode_t kLockMode = 0660;
// Buckets aged out per collection at most: the event loop's share stays
// small; a backlog (history shortened, a long pause) goes over a few.
constexpr size_t kAgeOutPerCollection = 4096;

std::string mdb_error(const std::string &what, int rc) {
    return what + ": " + mdb_strerror(rc);
}

// The edge id, made in the same transaction that creates the databases.
int ensure_edge_id(MDB_txn *txn, MDB_dbi meta, unsigned char out[KA_USAGE_EDGE_ID_LEN],
                   std::string &err) {
    MDB_val k{sizeof(KA_USAGE_META_EDGE_ID) - 1, const_cast<char *>(KA_USAGE_META_EDGE_ID)};
    MDB_val v{};
    int rc = mdb_get(txn, meta, &k, &v);
    if (rc == 0 && v.mv_size == KA_USAGE_EDGE_ID_LEN) {
        std::memcpy(out, v.mv_data, KA_USAGE_EDGE_ID_LEN);
        return 0;
    }
    if (rc == 0) {
        err = "the usage env's edge_id is not 12 bytes";
        return MDB_CORRUPTED;
    }
    if (rc != MDB_NOTFOUND) {
        err = mdb_error("reading edge_id", rc);
        return rc;
    }
    if (RAND_bytes(out, KA_USAGE_EDGE_ID_LEN) != 1) {
        err = "RAND_bytes failed";
        return EIO;
    }
    v = MDB_val{KA_USAGE_EDGE_ID_LEN, out};
    rc = mdb_put(txn, meta, &k, &v, 0);
    if (rc != 0) err = mdb_error("writing edge_id", rc);
    return rc;
}

// How long this edge keeps day buckets, for keyauthd's reads to clip to:
// written at every open, as the edge's keyauth_usage_history may change.
int put_days_kept(MDB_txn *txn, MDB_dbi meta, uint32_t days_kept, std::string &err) {
    MDB_val k{sizeof(KA_USAGE_META_DAYS_KEPT) - 1, const_cast<char *>(KA_USAGE_META_DAYS_KEPT)};
    unsigned char le[4];
    store_le<uint32_t>(le, days_kept);
    MDB_val v{sizeof(le), le};
    int rc = mdb_put(txn, meta, &k, &v, 0);
    if (rc != 0) err = mdb_error("writing days_kept", rc);
    return rc;
}

// Before LMDB opens: it would make lock.mdb with data.mdb's mode.
bool create_lock_file(const std::string &dir, std::string &err) {
    const std::string path = dir + "/lock.mdb";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, kLockMode);
    if (fd < 0) {
        if (errno == EEXIST) return true;
        err = "cannot create \"" + path + "\": " + std::strerror(errno);
        return false;
    }
    (void)::fchmod(fd, kLockMode);  // the umask may have taken the group's bits
    ::close(fd);
    return true;
}

// Adds c to the bucket at `key` of `dbi` (a record of a later layout is left
// as it is).
int add_bucket(MDB_txn *txn, MDB_dbi dbi, const unsigned char key[KA_USAGE_BUCKET_KEY_LEN],
               const BucketCounts &c) {
    MDB_val k{KA_USAGE_BUCKET_KEY_LEN, const_cast<unsigned char *>(key)}, v{};
    BucketCounts sum;
    int rc = mdb_get(txn, dbi, &k, &v);
    if (rc == 0 &&
        !decode_bucket(std::string_view(static_cast<const char *>(v.mv_data), v.mv_size), sum)) {
        return 0;
    }
    if (rc != 0 && rc != MDB_NOTFOUND) return rc;
    sum.add(c);
    unsigned char rec[KA_USAGE_BUCKET_SIZE];
    encode_bucket(sum, rec);
    v = MDB_val{sizeof(rec), rec};
    return mdb_put(txn, dbi, &k, &v, 0);
}

// Deletes the buckets of periods before `keep_from` from the start of the
// table (it is in time order: only old buckets are visited), at most
// `budget` of them; returns what is left of the budget.
int age_out_table(MDB_txn *txn, MDB_dbi dbi, uint32_t keep_from, size_t &budget) {
    MDB_cursor *cur = nullptr;
    int rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc != 0) return rc;
    MDB_val k{}, v{};
    rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    while (rc == 0 && budget > 0) {
        uint32_t period = 0;
        unsigned char account[KA_ID_LEN], key[KA_ID_LEN];
        if (decode_bucket_key(std::string_view(static_cast<const char *>(k.mv_data), k.mv_size),
                              period, account, key) &&
            period >= keep_from) {
            break;
        }
        if ((rc = mdb_cursor_del(cur, 0)) != 0) break;
        budget--;
        rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);  // the oldest left
    }
    mdb_cursor_close(cur);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

}  // namespace

bool file_id_of(const std::string &path, FileId &id) noexcept {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return false;
    id = FileId{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)};
    return true;
}

bool UsageEnv::replaced() const noexcept {
    try {
        FileId d, l;
        return !file_id_of(path_ + "/data.mdb", d) || d != data_id_ || !file_id_of(path_ + "/lock.mdb", l) ||
               l != lock_id_;
    } catch (...) {  // the path's string: out of memory is no reason to reopen
        return false;
    }
}

bool ensure_usage_dir(const std::string &path, std::string &err) {
    if (::mkdir(path.c_str(), kDirMode) == 0) {
        (void)::chmod(path.c_str(), kDirMode);  // the umask may have taken the group's bits
    } else if (errno != EEXIST) {
        err = "cannot make the directory \"" + path + "\": " + std::strerror(errno);
        return false;
    }
    return true;
}

UsageEnv::~UsageEnv() {
    if (env_ != nullptr) mdb_env_close(env_);
}

std::unique_ptr<UsageEnv> UsageEnv::open(const std::string &path, std::string &err,
                                         uint32_t days_kept, size_t map_bytes) {
    try {
        if (!ensure_usage_dir(path, err)) return nullptr;
        struct stat st;
        const bool fresh = ::stat((path + "/data.mdb").c_str(), &st) != 0;
        if (!create_lock_file(path, err)) return nullptr;
        std::unique_ptr<UsageEnv> u(new UsageEnv());
        u->days_kept_ = days_kept == 0 ? 1 : days_kept;
        int rc = mdb_env_create(&u->env_);
        if (rc != 0) {
            u->env_ = nullptr;
            err = mdb_error("mdb_env_create", rc);
            return nullptr;
        }
        mdb_env_set_maxdbs(u->env_, KA_USAGE_DB_COUNT);
        mdb_env_set_mapsize(u->env_, map_bytes);
        rc = mdb_env_open(u->env_, path.c_str(), MDB_NOSYNC | MDB_NOMETASYNC | MDB_NOTLS, kDataMode);
        if (rc != 0) {
            err = mdb_error("mdb_env_open(\"" + path + "\")", rc);
            return nullptr;
        }
        if (fresh) (void)::chmod((path + "/data.mdb").c_str(), kDataMode);
        int dead = 0;
        mdb_reader_check(u->env_, &dead);
        MDB_txn *txn = nullptr;
        rc = mdb_txn_begin(u->env_, nullptr, 0, &txn);
        if (rc != 0) {
            err = mdb_error("mdb_txn_begin", rc);
            return nullptr;
        }
        if ((rc = mdb_dbi_open(txn, KA_USAGE_DB_USAGE, MDB_CREATE, &u->usage_)) != 0 ||
            (rc = mdb_dbi_open(txn, KA_USAGE_DB_META, MDB_CREATE, &u->meta_)) != 0 ||
            (rc = mdb_dbi_open(txn, KA_USAGE_DB_HOURS, MDB_CREATE, &u->hours_)) != 0 ||
            (rc = mdb_dbi_open(txn, KA_USAGE_DB_DAYS, MDB_CREATE, &u->days_)) != 0) {
            err = mdb_error("mdb_dbi_open", rc);
            mdb_txn_abort(txn);
            return nullptr;
        }
        if (ensure_edge_id(txn, u->meta_, u->edge_id_, err) != 0 ||
            put_days_kept(txn, u->meta_, u->days_kept_, err) != 0) {
            mdb_txn_abort(txn);
            return nullptr;
        }
        if ((rc = mdb_txn_commit(txn)) != 0) {
            err = mdb_error("mdb_txn_commit", rc);
            return nullptr;
        }
        // the files this handle has: replaced() compares the path's with them
        mdb_filehandle_t fd = -1;
        if (mdb_env_get_fd(u->env_, &fd) != 0 || ::fstat(fd, &st) != 0 ||
            !file_id_of(path + "/lock.mdb", u->lock_id_)) {
            err = "\"" + path + "\" cannot be examined: " + std::strerror(errno);
            return nullptr;
        }
        u->data_id_ = FileId{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)};
        u->path_ = path;
        return u;
    } catch (const std::exception &e) {  // bad_alloc
        err = e.what();
        return nullptr;
    }
}

bool UsageEnv::add(const UsageDelta *deltas, size_t n, int64_t now_ms,
                   std::string &err) noexcept {
    int rc = write(deltas, n, now_ms);
    // a full map is doubled and the same write made again (the aborted one
    // wrote nothing); the file stays sparse, so only what is used takes disk
    for (int grown = 0; rc == MDB_MAP_FULL && grown < kMaxGrowths; grown++) {
        MDB_envinfo info;
        if (mdb_env_info(env_, &info) != 0 || info.me_mapsize >= kMaxMapSize) break;
        if (mdb_env_set_mapsize(env_, info.me_mapsize * 2) != 0) break;
        rc = write(deltas, n, now_ms);
    }
    if (rc != 0) {
        err = mdb_strerror(rc);
        return false;
    }
    return true;
}

int UsageEnv::write(const UsageDelta *deltas, size_t n, int64_t now_ms) noexcept {
    MDB_txn *txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc == MDB_MAP_RESIZED) {  // another writer (an overlapping worker) grew it
        mdb_env_set_mapsize(env_, 0);
        rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    }
    if (rc != 0) return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const BucketCounts c{deltas[i].allowed, deltas[i].rate_limited, deltas[i].quota_exceeded,
                             deltas[i].units};
        if (!c.empty()) {
            const int64_t at = bucket_of(deltas[i], now_ms);
            const uint32_t hour = period_of(Granularity::kHour, at), day = period_of(Granularity::kDay, at);
            unsigned char bkey[KA_USAGE_BUCKET_KEY_LEN];
            encode_bucket_key(hour, deltas[i].account_id, deltas[i].key_id, bkey);
            if ((rc = add_bucket(txn, hours_, bkey, c)) != 0) break;
            encode_bucket_key(day, deltas[i].account_id, deltas[i].key_id, bkey);
            if ((rc = add_bucket(txn, days_, bkey, c)) != 0) break;
        }
        unsigned char key[KA_USAGE_KEY_LEN];
        std::memcpy(key, deltas[i].account_id, KA_ID_LEN);
        std::memcpy(key + KA_ID_LEN, deltas[i].key_id, KA_ID_LEN);
        MDB_val k{sizeof(key), key}, v{};
        UsageTotals t;
        rc = mdb_get(txn, usage_, &k, &v);
        if (rc == 0 && !decode_usage_record(
                           std::string_view(static_cast<const char *>(v.mv_data), v.mv_size), t)) {
            // a record of a later layout: keep it as it is, never overwrite it
            rc = 0;
            continue;
        }
        if (rc != 0 && rc != MDB_NOTFOUND) break;
        t.add(UsageTotals{deltas[i].allowed, deltas[i].rate_limited, deltas[i].last_used_ms});
        unsigned char rec[KA_USAGE_RECORD_SIZE];
        encode_usage_record(t, rec);
        v = MDB_val{sizeof(rec), rec};
        rc = mdb_put(txn, usage_, &k, &v, 0);
    }
    size_t budget = kAgeOutPerCollection;
    if (rc == 0) rc = age_out_both(txn, now_ms, budget);
    if (rc == 0) return mdb_txn_commit(txn);
    mdb_txn_abort(txn);
    return rc;
}

int UsageEnv::age_out_both(MDB_txn *txn, int64_t now_ms, size_t &budget) noexcept {
    int rc = age_out_table(txn, hours_, first_kept_period(Granularity::kHour, now_ms, days_kept_), budget);
    if (rc == 0) rc = age_out_table(txn, days_, first_kept_period(Granularity::kDay, now_ms, days_kept_), budget);
    return rc;
}

bool UsageEnv::age_out(int64_t now_ms, std::string &err) noexcept {
    MDB_txn *txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    if (rc == MDB_MAP_RESIZED) {
        mdb_env_set_mapsize(env_, 0);
        rc = mdb_txn_begin(env_, nullptr, 0, &txn);
    }
    if (rc != 0) {
        err = mdb_strerror(rc);
        return false;
    }
    const size_t budget_was = kAgeOutPerCollection;
    size_t budget = budget_was;
    rc = age_out_both(txn, now_ms, budget);
    // nothing past its keeping (the usual case): nothing is written
    if (rc == 0 && budget == budget_was) {
        mdb_txn_abort(txn);
        return true;
    }
    if (rc == 0) rc = mdb_txn_commit(txn);
    else mdb_txn_abort(txn);
    if (rc != 0) err = mdb_strerror(rc);
    return rc == 0;
}

}  // namespace keyauth
