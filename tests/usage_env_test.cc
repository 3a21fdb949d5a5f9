#include "usage_env.h"

#include <gtest/gtest.h>
#include <lmdb.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "keyauth_core.h"
#include "temp_dir.h"
#include "usage_record.h"

using namespace keyauth;

namespace {

UsageDelta delta(unsigned char key, uint64_t allowed, uint64_t limited, int64_t last) {
    UsageDelta d{};
    std::memset(d.account_id, 'a', KA_ID_LEN);
    std::memset(d.key_id, key, KA_ID_LEN);
    d.allowed = allowed;
    d.rate_limited = limited;
    d.last_used_ms = last;
    return d;
}

// The record of one key, read back with plain LMDB as keyauthd would.
bool read_totals(const std::string &path, unsigned char key, UsageTotals &out) {
    MDB_env *env = nullptr;
    mdb_env_create(&env);
    mdb_env_set_maxdbs(env, KA_USAGE_DB_COUNT);
    bool found = false;
    if (mdb_env_open(env, path.c_str(), MDB_RDONLY, 0) == 0) {
        MDB_txn *txn = nullptr;
        MDB_dbi dbi;
        if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0 &&
            mdb_dbi_open(txn, KA_USAGE_DB_USAGE, 0, &dbi) == 0) {
            unsigned char k[KA_USAGE_KEY_LEN];
            std::memset(k, 'a', KA_ID_LEN);
            std::memset(k + KA_ID_LEN, key, KA_ID_LEN);
            MDB_val kv{sizeof(k), k}, v{};
            found = mdb_get(txn, dbi, &kv, &v) == 0 &&
                    decode_usage_record({static_cast<const char *>(v.mv_data), v.mv_size}, out);
        }
        if (txn) mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    return found;
}

// A whole collection, part after part, as the collecting worker walks it.
long flush_all(ka_usage_env_t *env, std::vector<unsigned char> &mem, const ka_lock_t &lock) {
    char err[256];
    long written = 0;
    for (size_t from = 0; from < ka_usage_table_slots(mem.data());) {
        const long n = ka_usage_flush_part(mem.data(), env, &from, 6000, 300000, &lock, err,
                                           sizeof(err));
        EXPECT_GE(n, 0) << err;
        if (n < 0) return -1;
        written += n;
    }
    return written;
}

}  // namespace

TEST(UsageRecord, RoundTripsAndRefusesOtherLayouts) {
    UsageTotals t{1ull << 40, 7, 1'800'000'000'123};
    unsigned char rec[KA_USAGE_RECORD_SIZE];
    encode_usage_record(t, rec);
    EXPECT_EQ(rec[0], 1);
    EXPECT_EQ(rec[1], 0);
    EXPECT_EQ(rec[8 + 5], 1) << "allowed, little-endian at offset 8";
    UsageTotals back;
    ASSERT_TRUE(decode_usage_record({reinterpret_cast<char *>(rec), sizeof(rec)}, back));
    EXPECT_EQ(back, t);
    EXPECT_FALSE(decode_usage_record({reinterpret_cast<char *>(rec), sizeof(rec) - 1}, back));
    rec[0] = 2;
    EXPECT_FALSE(decode_usage_record({reinterpret_cast<char *>(rec), sizeof(rec)}, back));
}

TEST(UsageRecord, AddSumsCountsAndKeepsTheLaterLastUse) {
    UsageTotals a{1, 2, 100};
    a.add(UsageTotals{10, 20, 50});
    EXPECT_EQ(a, (UsageTotals{11, 22, 100}));
    a.add(UsageTotals{0, 0, 300});
    EXPECT_EQ(a.last_used_ms, 300);
}

TEST(UsageEnv, MakesTheDirectoryAndKeepsItsEdgeId) {
    keyauth::testing::TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    unsigned char first[KA_USAGE_EDGE_ID_LEN];
    {
        const mode_t umask_was = umask(077);  // the modes hold whatever nginx's umask
        auto env = UsageEnv::open(path, err);
        umask(umask_was);
        ASSERT_TRUE(env) << err;
        std::memcpy(first, env->edge_id(), sizeof(first));
    }
    // the workers' user writes it; its group (keyauthd's, keyauth-syncd's)
    // reads data.mdb and takes reader slots in lock.mdb, nothing more
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 02750u);
    ASSERT_EQ(stat((path + "/data.mdb").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    ASSERT_EQ(stat((path + "/lock.mdb").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0660u);
    auto again = UsageEnv::open(path, err);
    ASSERT_TRUE(again) << err;
    EXPECT_EQ(0, std::memcmp(first, again->edge_id(), sizeof(first)));
    EXPECT_FALSE(UsageEnv::open(dir.sub("missing/parent"), err));
    EXPECT_NE(err.find("missing/parent"), std::string::npos) << err;
}

TEST(UsageEnv, AddsDeltasToCumulativeTotals) {
    keyauth::testing::TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::string err;
    auto env = UsageEnv::open(path, err);
    ASSERT_TRUE(env) << err;
    std::vector<UsageDelta> d{delta(1, 5, 1, 1000), delta(2, 1, 0, 900)};
    ASSERT_TRUE(env->add(d.data(), d.size(), 1000, err)) << err;
    d = {delta(1, 2, 3, 800)};
    ASSERT_TRUE(env->add(d.data(), d.size(), 1000, err)) << err;
    UsageTotals t;
    ASSERT_TRUE(read_totals(path, 1, t));
    EXPECT_EQ(t, (UsageTotals{7, 4, 1000}));
    ASSERT_TRUE(read_totals(path, 2, t));
    EXPECT_EQ(t, (UsageTotals{1, 0, 900}));
}

// The C API end to end: counts in a table, a flush, the totals in the env.
TEST(UsageEnv, FlushMovesTheTableIntoTheEnv) {
    keyauth::testing::TempDir dir;
    const std::string path = dir.sub("db.usage");
    std::vector<unsigned char> mem(UsageTable::kHeaderBytes + 256 * UsageTable::kSlotBytes);
    ASSERT_TRUE(ka_usage_table_format(mem.data(), mem.size()));
    std::mutex mu;
    ka_lock_t lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                   [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
    ka_auth_result_t key{};
    std::memset(key.account_id_bin, 'a', KA_ID_LEN);
    std::memset(key.key_id_bin, 3, KA_ID_LEN);
    for (int i = 0; i < 10; i++) {
        ka_usage_count(mem.data(), &key, i < 7 ? KA_USAGE_ALLOWED : KA_USAGE_RATE_LIMITED,
                       i < 7 ? 1 : 0, 5000 + i, 1, &lock);
    }
    char err[256];
    ka_usage_env_t *env = ka_usage_env_open(path.c_str(), 400, err, sizeof(err));
    ASSERT_NE(env, nullptr) << err;
    EXPECT_EQ(flush_all(env, mem, lock), 1);
    EXPECT_EQ(flush_all(env, mem, lock), 0);
    ka_usage_env_close(env);
    UsageTotals t;
    ASSERT_TRUE(read_totals(path, 3, t));
    EXPECT_EQ(t, (UsageTotals{7, 3, 5009}));
}

// A collection in parts (the collecting worker gives its event loop back
// between them): each part is at most one transaction of 4096 slots, the
// walk ends at the table's last slot, and every key is collected once.
TEST(UsageEnv, FlushInPartsCollectsEveryKeyOnce) {
    keyauth::testing::TempDir dir;
    const std::string path = dir.sub("db.usage");
    const size_t slots = 10000;  // parts of 4096, 4096 and 1808 slots
    std::vector<unsigned char> mem(UsageTable::kHeaderBytes + slots * UsageTable::kSlotBytes);
    ASSERT_TRUE(ka_usage_table_format(mem.data(), mem.size()));
    ASSERT_EQ(ka_usage_table_slots(mem.data()), slots);
    std::mutex mu;
    ka_lock_t lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                   [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
    for (int k = 1; k <= 200; k++) {
        ka_auth_result_t key{};
        std::memset(key.account_id_bin, 'a', KA_ID_LEN);
        std::memset(key.key_id_bin, k, KA_ID_LEN);
        for (int i = 0; i < k % 7 + 1; i++) {
            ka_usage_count(mem.data(), &key, KA_USAGE_ALLOWED, 1, 5000 + k, 1, &lock);
        }
    }
    char err[256];
    ka_usage_env_t *env = ka_usage_env_open(path.c_str(), 400, err, sizeof(err));
    ASSERT_NE(env, nullptr) << err;
    std::vector<size_t> ends;
    long written = 0;
    for (size_t from = 0; from < slots;) {
        const long n = ka_usage_flush_part(mem.data(), env, &from, 6000, 300000, &lock, err,
                                           sizeof(err));
        ASSERT_GE(n, 0) << err;
        written += n;
        ends.push_back(from);
        ASSERT_LE(ends.size(), 3u);
    }
    EXPECT_EQ(ends, (std::vector<size_t>{4096, 8192, 10000}));
    EXPECT_EQ(written, 200);
    size_t past_the_end = slots;
    EXPECT_EQ(ka_usage_flush_part(mem.data(), env, &past_the_end, 6000, 300000, &lock, err,
                                  sizeof(err)),
              0);
    EXPECT_EQ(past_the_end, slots);
    EXPECT_EQ(flush_all(env, mem, lock), 0);
    ka_usage_env_close(env);
    for (int k = 1; k <= 200; k++) {
        UsageTotals t;
        ASSERT_TRUE(read_totals(path, static_cast<unsigned char>(k), t)) << k;
        EXPECT_EQ(t, (UsageTotals{static_cast<uint64_t>(k % 7 + 1), 0, 5000 + k})) << k;
    }
}

// The collecting worker's handle knows the files it opened: a store removed
// or another put at the path is "replaced", and the worker opens the path
// anew (a new store, a new edge id) instead of writing into deleted files
// until a reload (#44 item 11).
TEST(UsageEnv, KnowsWhenItsFilesWereRemovedOrReplaced) {
    keyauth::testing::TempDir dir;
    const std::string path = dir.sub("db.usage");
    char err[256];
    ka_usage_env_t *env = ka_usage_env_open(path.c_str(), 400, err, sizeof(err));
    ASSERT_NE(env, nullptr) << err;
    EXPECT_FALSE(ka_usage_env_replaced(env)) << "just opened";
    ASSERT_EQ(std::system(("rm -rf '" + path + "'").c_str()), 0);
    EXPECT_TRUE(ka_usage_env_replaced(env)) << "removed";
    ka_usage_env_t *fresh = ka_usage_env_open(path.c_str(), 400, err, sizeof(err));
    ASSERT_NE(fresh, nullptr) << err;
    EXPECT_TRUE(ka_usage_env_replaced(env)) << "another store at the path";
    EXPECT_FALSE(ka_usage_env_replaced(fresh));
    ka_usage_env_close(env);
    // only lock.mdb replaced: the readers' slots are in another file now
    ASSERT_EQ(std::remove((path + "/lock.mdb").c_str()), 0);
    EXPECT_TRUE(ka_usage_env_replaced(fresh)) << "lock.mdb removed";
    ka_usage_env_close(fresh);
}
