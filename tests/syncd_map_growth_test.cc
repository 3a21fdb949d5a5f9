// keyauth-syncd writes the edge's store: its rebuilds and batches grow a
// map they fill (admin/lib/lmdb_map.h) instead of stopping the mirror.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mirror.h"
#include "syncd_fixtures.h"
#include "temp_dir.h"

using namespace keyauth;
using namespace keyauth::syncd;
using keyauth::testing::TempDir;
namespace kt = keyauth::testing;

namespace {

constexpr size_t kMiB = size_t{1} << 20;

std::vector<RecordChange> keys(unsigned from, unsigned to) {
    std::vector<RecordChange> out;
    for (unsigned n = from; n < to; n++) out.push_back({Table::kKeysByHash, kt::test_hash(n), kt::key_record(n, 1)});
    return out;
}

size_t map_of(MDB_env *env) {
    MDB_envinfo info;
    mdb_env_info(env, &info);
    return info.me_mapsize;
}

}  // namespace

TEST(SyncdMapGrowth, RebuildsAndBatchesPastASmallMapGrowIt) {
    TempDir dir;
    Mirror m(dir.sub("db"), kMiB);
    std::vector<RecordChange> first = keys(1, 8000);
    first.push_back({Table::kAccounts, kt::id_bytes(kt::test_id(1)), kt::account_record("acme")});
    auto rb = m.begin_rebuild();
    ASSERT_FALSE(rb->refused(first));  // a trial in a map too small for it
    rb->add(first);
    m.finish_rebuild(std::move(rb), MirrorMark{10, 7});
    ASSERT_TRUE(m.env());
    const size_t rebuilt = map_of(m.env());
    EXPECT_GT(rebuilt, kMiB);

    const std::vector<RecordChange> batch = keys(8000, 40000);  // more than the rebuilt map holds
    ASSERT_FALSE(m.refused(batch));
    m.apply(batch, 11);
    EXPECT_GT(map_of(m.env()), rebuilt);
    EXPECT_EQ(m.mark()->revision, 11);
    const kt::Dump d = kt::dump_env(m.env());
    EXPECT_EQ(d.at(KA_DB_KEYS_BY_HASH).size(), 39999u);
}
