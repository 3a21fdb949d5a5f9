// The usage of keys on one host: the usage env the edge's collecting worker
// writes, opened read-only once it exists (it may appear after keyauthd
// starts: before, every key reads as unused). A store removed or replaced at
// its path (the recovery of a corrupt one) is let go at the next read and
// the path opened anew: never read from deleted files until a restart.
#include <lmdb.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include "le.h"
#include "store_error.h"
#include "usage_env.h"
#include "usage_source.h"

namespace keyauth {
namespace {

class LmdbUsageSource final : public UsageSource {
public:
    explicit LmdbUsageSource(std::string path) : path_(std::move(path)) {}

    std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) override {
        std::map<Id, KeyUsage> out;
        for (const Id &k : keys) out[k];
        std::optional<Reading> t = tables();
        if (!t) return out;  // no usage env yet, or made and never written
        const MDB_dbi *dbi = &t->tables.usage;
        MDB_txn *txn = begin_read(env_);
        struct Abort {
            MDB_txn *t;
            ~Abort() { mdb_txn_abort(t); }
        } abort{txn};
        for (auto &[key, usage] : out) {
            unsigned char k[KA_USAGE_KEY_LEN];
            std::memcpy(k, account.data(), KA_ID_LEN);
            std::memcpy(k + KA_ID_LEN, key.data(), KA_ID_LEN);
            MDB_val kv{sizeof(k), k}, v{};
            int rc = mdb_get(txn, *dbi, &kv, &v);
            if (rc == MDB_NOTFOUND) continue;
            if (rc != 0) fail("mdb_get", rc);
            // a record of a later layout reads as unknown: zeros, never a guess
            (void)decode_usage_record({static_cast<const char *>(v.mv_data), v.mv_size}, usage);
        }
        return out;
    }

    // The tables are in time order: one cursor walk from the first period's
    // bucket; with an account, one seek per period to that account's
    // buckets (a period's other accounts are never visited).
    void buckets(Granularity g, uint32_t from, uint32_t to, const Id *account, const Id *key,
                 const BucketSink &each) override {
        std::optional<Reading> t = tables();
        if (!t || !t->tables.buckets || from >= to) return;
        MDB_txn *txn = begin_read(env_);
        MDB_cursor *cur = nullptr;
        struct Done {
            MDB_txn *t;
            MDB_cursor **c;
            ~Done() {
                if (*c != nullptr) mdb_cursor_close(*c);
                mdb_txn_abort(t);
            }
        } done{txn, &cur};
        int rc = mdb_cursor_open(txn, g == Granularity::kHour ? t->tables.hours : t->tables.days, &cur);
        if (rc != 0) fail("mdb_cursor_open", rc);
        BucketRow row;
        for (uint32_t period = from; period < to;) {
            unsigned char seek[KA_USAGE_BUCKET_KEY_LEN] = {};
            size_t seek_len = 4;
            encode_bucket_period(period, seek);
            if (account != nullptr) {
                std::memcpy(seek + 4, account->data(), KA_ID_LEN);
                seek_len += KA_ID_LEN;
                if (key != nullptr) {
                    std::memcpy(seek + 4 + KA_ID_LEN, key->data(), KA_ID_LEN);
                    seek_len += KA_ID_LEN;
                }
            }
            MDB_val k{seek_len, seek}, v{};
            rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
            uint32_t next = to;  // where the walk goes on
            for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
                const std::string_view kb(static_cast<const char *>(k.mv_data), k.mv_size);
                if (!decode_bucket_key(kb, row.period, row.account.data(), row.key.data())) continue;
                if (row.period >= to) break;
                if (account != nullptr &&
                    std::memcmp(kb.data(), seek, seek_len) != 0) {  // past the account (or key)
                    next = row.period > period ? row.period : period + 1;
                    break;
                }
                // a record of a later layout is not guessed at
                if (!decode_bucket({static_cast<const char *>(v.mv_data), v.mv_size}, row.counts)) continue;
                each(row);
            }
            if (rc != 0 && rc != MDB_NOTFOUND) fail("mdb_cursor_get", rc);
            if (account == nullptr || rc == MDB_NOTFOUND) break;  // one walk covers every account
            period = next;
        }
    }

    // What the edge recorded at its last open (meta days_kept), else the
    // default (no env yet, or one of an edge older than the record).
    uint32_t days_kept() override {
        std::optional<Reading> t = tables();
        if (!t || !t->tables.has_meta) return kDefaultDayBucketsKept;
        MDB_txn *txn = begin_read(env_);
        MDB_val k{sizeof(KA_USAGE_META_DAYS_KEPT) - 1, const_cast<char *>(KA_USAGE_META_DAYS_KEPT)}, v{};
        const int rc = mdb_get(txn, t->tables.meta, &k, &v);
        uint32_t days = 0;
        if (rc == 0 && v.mv_size == sizeof(days)) days = load_le<uint32_t>(static_cast<const unsigned char *>(v.mv_data));
        mdb_txn_abort(txn);
        if (rc != 0 && rc != MDB_NOTFOUND) fail("mdb_get", rc);
        return days == 0 ? kDefaultDayBucketsKept : days;
    }

private:
    // An open env and the files it opened.
    struct Env {
        MDB_env *env = nullptr;
        FileId data, lock;
        bool known = false;  // data and lock examined at open
        ~Env() {
            if (env != nullptr) mdb_env_close(env);
        }
        void identify(const std::string &path) {
            mdb_filehandle_t fd = -1;
            struct stat st {};
            // unknown (not examinable): never taken for replaced
            known = mdb_env_get_fd(env, &fd) == 0 && ::fstat(fd, &st) == 0 && file_id_of(path + "/lock.mdb", lock);
            data = FileId{static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino)};
        }
        bool replaced_since(const std::string &path) const {
            FileId d, l;
            return known && (!file_id_of(path + "/data.mdb", d) || d != data || !file_id_of(path + "/lock.mdb", l) ||
                             l != lock);
        }
    };

    [[noreturn]] void fail(const char *what, int rc) {
        throw StoreError(StoreError::Kind::kUnavailable, "",
                         "usage env \"" + path_ + "\": " + what + ": " + mdb_strerror(rc));
    }

    MDB_txn *begin_read(const std::unique_ptr<Env> &e) {
        MDB_env *env = e->env;
        MDB_txn *txn = nullptr;
        int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        if (rc == MDB_MAP_RESIZED) {
            mdb_env_set_mapsize(env, 0);
            rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        }
        if (rc != 0) fail("mdb_txn_begin", rc);
        return txn;
    }

    struct Tables {
        MDB_dbi usage, hours, days, meta;
        bool buckets;  // hours and days exist (an env of an edge older
                       // than the buckets has only the totals)
        bool has_meta;
    };

    // What a read uses: the tables, and a shared hold of rw_ that keeps
    // env_ open until the read is over (a replaced env is closed under the
    // exclusive lock, when no read holds it).
    struct Reading {
        std::shared_lock<std::shared_mutex> hold;
        Tables tables;
    };

    // The env and its tables, opened once: LMDB forbids mdb_dbi_open in
    // concurrent transactions, and a handle opened in a transaction that is
    // aborted is closed again under the other readers (keyauthd reads from
    // several pool threads). So the first reader that finds the table opens
    // it under the exclusive lock, in a transaction it commits; later reads
    // only use it. An env without the bucket tables (written by an edge
    // older than them) still gives its totals; the tables are looked for
    // again on every read until an edge of this build has made them. Every
    // read first checks that the files at the path are still the ones open
    // (two stat calls).
    std::optional<Reading> tables() {
        {
            std::shared_lock<std::shared_mutex> hold(rw_);
            if (env_ != nullptr && tables_ && tables_->buckets && !replaced())
                return Reading{std::move(hold), *tables_};
        }
        {
            std::unique_lock<std::shared_mutex> excl(rw_);
            refresh();
        }
        std::shared_lock<std::shared_mutex> hold(rw_);
        if (env_ == nullptr || !tables_) return std::nullopt;
        return Reading{std::move(hold), *tables_};
    }

    // The files at the path are not the ones env_ has open (removed, or
    // another store put there). Under rw_.
    bool replaced() const { return env_ != nullptr && env_->replaced_since(path_); }

    // Under the exclusive lock: a replaced env closed, the path's opened if
    // it is there, its tables looked up.
    void refresh() {
        if (replaced()) {
            env_.reset();
            tables_.reset();
        }
        if (env_ == nullptr) {
            struct stat st;
            if (::stat((path_ + "/data.mdb").c_str(), &st) != 0) return;
            env_ = std::make_unique<Env>();
            int rc = mdb_env_create(&env_->env);
            if (rc == 0) {
                mdb_env_set_maxdbs(env_->env, KA_USAGE_DB_COUNT);
                rc = mdb_env_open(env_->env, path_.c_str(), MDB_RDONLY | MDB_NOTLS, 0);
            }
            if (rc != 0) {
                env_.reset();
                fail("mdb_env_open", rc);
            }
            env_->identify(path_);
        }
        if (tables_ && tables_->buckets) return;
        MDB_txn *txn = begin_read(env_);
        Tables t = tables_.value_or(Tables{});
        int rc = tables_ ? 0 : mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &t.usage);
        if (rc != 0) {
            mdb_txn_abort(txn);
            // made, never written: asked again next time
            if (rc == MDB_NOTFOUND) return;
            fail("mdb_dbi_open", rc);
        }
        if (!t.has_meta) {
            rc = mdb_dbi_open(txn, KA_USAGE_DB_META, 0, &t.meta);
            if (rc != 0 && rc != MDB_NOTFOUND) {
                mdb_txn_abort(txn);
                fail("mdb_dbi_open", rc);
            }
            t.has_meta = rc == 0;
        }
        rc = mdb_dbi_open(txn, KA_USAGE_DB_HOURS, 0, &t.hours);
        if (rc == 0) rc = mdb_dbi_open(txn, KA_USAGE_DB_DAYS, 0, &t.days);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            mdb_txn_abort(txn);
            fail("mdb_dbi_open", rc);
        }
        t.buckets = rc == 0;
        rc = mdb_txn_commit(txn);  // keeps the handles for every later transaction
        if (rc != 0) fail("mdb_txn_commit", rc);
        tables_ = t;
    }

    std::string path_;
    std::shared_mutex rw_;  // reads share it; opening and closing env_ take it alone
    std::unique_ptr<Env> env_;
    std::optional<Tables> tables_;  // of env_: set once, then once more when the buckets appear
};

}  // namespace

std::unique_ptr<UsageSource> make_lmdb_usage_source(std::string usage_db_path) {
    return std::make_unique<LmdbUsageSource>(std::move(usage_db_path));
}

}  // namespace keyauth
