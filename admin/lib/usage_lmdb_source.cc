// The usage of keys on one host: the usage env the edge's collecting worker
// writes, opened read-only once it exists (it may appear after keyauthd
// starts: before, every key reads as unused).
#include <lmdb.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>

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
        MDB_env *env = open();
        if (env == nullptr) return out;
        MDB_txn *txn = nullptr;
        int rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        if (rc == MDB_MAP_RESIZED) {
            mdb_env_set_mapsize(env, 0);
            rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
        }
        if (rc != 0) fail("mdb_txn_begin", rc);
        struct Abort {
            MDB_txn *t;
            ~Abort() { mdb_txn_abort(t); }
        } abort{txn};
        MDB_dbi dbi;
        rc = mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &dbi);
        if (rc == MDB_NOTFOUND) return out;  // made, never written
        if (rc != 0) fail("mdb_dbi_open", rc);
        for (auto &[key, usage] : out) {
            unsigned char k[KA_USAGE_KEY_LEN];
            std::memcpy(k, account.data(), KA_ID_LEN);
            std::memcpy(k + KA_ID_LEN, key.data(), KA_ID_LEN);
            MDB_val kv{sizeof(k), k}, v{};
            rc = mdb_get(txn, dbi, &kv, &v);
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

    MDB_env *open() {
        std::lock_guard<std::mutex> lock(mu_);
        if (env_ != nullptr) return env_;
        struct stat st;
        if (::stat((path_ + "/data.mdb").c_str(), &st) != 0) return nullptr;
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
        return env_;
    }

    std::string path_;
    std::mutex mu_;
    MDB_env *env_ = nullptr;
};

}  // namespace

std::unique_ptr<UsageSource> make_lmdb_usage_source(std::string usage_db_path) {
    return std::make_unique<LmdbUsageSource>(std::move(usage_db_path));
}

}  // namespace keyauth
