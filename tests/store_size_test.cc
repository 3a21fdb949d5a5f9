// Bytes a key on disk when keys come in batches: at most 500 (issue 30's
// line). Schema 3 appends a batch's key records (key_records by key id), so
// a batch rewrites only key_slots' chunks, not most of a by-hash B-tree (the
// 724-742 bytes a key of schema 2). And LMDB hands a write only the pages
// freed by commits before the last one, so each large batch written right
// after another could not reuse the pages that one freed without the extra
// commit of LmdbBackend::release_frees_of. Both writers of large batches are
// held to it: the Store (keyauthctl key create --count, keyauthd) and
// keyauth-syncd's mirror.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <string>
#include <vector>

#include "mirror.h"
#include "sha256.h"
#include "store.h"
#include "syncd_fixtures.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;
namespace kt = keyauth::testing;

namespace {

constexpr size_t kBatches = 10;
constexpr size_t kBatch = 2000;  // above LmdbBackend::kLargeWrite
constexpr size_t kKeys = kBatches * kBatch;
// 437-439 here: the tables about 350 bytes a key, one batch's frees (the
// key_slots chunks it rewrote) the rest.
constexpr size_t kMaxBytesAKey = 500;

size_t file_bytes(MDB_env *env) {
    MDB_envinfo info;
    MDB_stat st;
    EXPECT_EQ(mdb_env_info(env, &info), 0);
    EXPECT_EQ(mdb_env_stat(env, &st), 0);
    return (info.me_last_pgno + 1) * st.ms_psize;
}

}  // namespace

TEST(StoreSize, BatchesOfKeysReuseThePagesOfTheBatchBefore) {
    TempDir dir;
    Store store(dir.sub("db"));
    AccountChanges many;
    many.max_keys = kKeys;
    const Id acc = store.create_account("a", 10, many).account.id;
    for (size_t b = 0; b < kBatches; b++) store.create_keys(acc, "bulk", {"ip:read"}, 10, kBatch);
    const size_t per_key = *store.gauges().used_bytes / kKeys;
    EXPECT_LE(per_key, kMaxBytesAKey);
}

TEST(StoreSize, SyncdBatchesReuseThePagesOfTheBatchBefore) {
    TempDir dir;
    syncd::Mirror m(dir.sub("db"), 0);
    auto rb = m.begin_rebuild();
    rb->add({{Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acme")}});
    m.finish_rebuild(std::move(rb), syncd::MirrorMark{1, 7});
    unsigned key = 2;
    for (size_t b = 0; b < kBatches; b++) {
        std::vector<RecordChange> batch;
        for (size_t i = 0; i < kBatch; i++, key++) {
            const Digest h = sha256(std::to_string(key));  // spread as real hashes are
            batch.push_back({Table::kKeysByHash, std::string(h.begin(), h.end()), kt::key_record(key, 1)});
        }
        m.apply(batch, static_cast<int64_t>(b) + 2);
    }
    EXPECT_LE(file_bytes(m.env()) / kKeys, kMaxBytesAKey);
}
