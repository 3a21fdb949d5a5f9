// The usage of keys on one host: the usage env the edge's collecting worker
// writes, opened read-only once it exists (it may appear after keyauthd
// starts: before, every key reads as unused).
#include <lmdb.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <optional>

#include "store_error.h"
#include "usage_source.h"

namespace keyauth {
namespace {

class LmdbUsageSource final : public UsageSource {
public:
    explicit LmdbUsageSource(std::string path) : path_(std::move(path)) {}
    ~LmdbUsageSource() override {
        if (env_ != nullptr) mdb_env_close(env_);
    }

    std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) override {
        std::map<Id, KeyUsage> out;
        for (const Id &k : keys) out[k];
        std::optional<MDB_dbi> dbi = usage_table();
        if (!dbi) return out;  // no usage env yet, or made and never written
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

private:
    [[noreturn]] void fail(const char *what, int rc) {
        throw StoreError(StoreError::Kind::kUnavailable, "",
                         "usage env \"" + path_ + "\": " + what + ": " + mdb_strerror(rc));
    }

    MDB_txn *begin_read(MDB_env *env) {
        MDB_txn *txn = nullptr;
        int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        if (rc == MDB_MAP_RESIZED) {
            mdb_env_set_mapsize(env, 0);
            rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        }
        if (rc != 0) fail("mdb_txn_begin", rc);
        return txn;
    }

    // The env and its usage table, opened once: LMDB forbids mdb_dbi_open in
    // concurrent transactions, and a handle opened in a transaction that is
    // aborted is closed again under the other readers (keyauthd reads from
    // several pool threads). So the first reader that finds the table opens
    // it under the lock, in a transaction it commits; later reads only use it.
    std::optional<MDB_dbi> usage_table() {
        std::lock_guard<std::mutex> lock(mu_);
        if (dbi_) return dbi_;
        if (env_ == nullptr) {
            struct stat st;
            if (::stat((path_ + "/data.mdb").c_str(), &st) != 0) return std::nullopt;
            MDB_env *env = nullptr;
            int rc = mdb_env_create(&env);
            if (rc == 0) {
                mdb_env_set_maxdbs(env, KA_USAGE_DB_COUNT);
                rc = mdb_env_open(env, path_.c_str(), MDB_RDONLY | MDB_NOTLS, 0);
            }
            if (rc != 0) {
                if (env != nullptr) mdb_env_close(env);
                fail("mdb_env_open", rc);
            }
            env_ = env;
        }
        MDB_txn *txn = begin_read(env_);
        MDB_dbi dbi;
        int rc = mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &dbi);
        if (rc != 0) {
            mdb_txn_abort(txn);
            if (rc == MDB_NOTFOUND) return std::nullopt;  // made, never written: asked again next time
            fail("mdb_dbi_open", rc);
        }
        rc = mdb_txn_commit(txn);  // keeps the handle for every later transaction
        if (rc != 0) fail("mdb_txn_commit", rc);
        dbi_ = dbi;
        return dbi_;
    }

    std::string path_;
    std::mutex mu_;
    MDB_env *env_ = nullptr;
    std::optional<MDB_dbi> dbi_;  // set once, under mu_
};

}  // namespace

std::unique_ptr<UsageSource> make_lmdb_usage_source(std::string usage_db_path) {
    return std::make_unique<LmdbUsageSource>(std::move(usage_db_path));
}

}  // namespace keyauth
