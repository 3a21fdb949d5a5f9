// The rebuild's read-ahead against a real etcd member on loopback
// (tests/etcd_cluster.h): every range's pages, each range in order, at the
// revision of the first page, however far ahead it reads and on however many
// clients; dropped or stopped midway it ends; a member gone midway is an
// error, never a short snapshot taken for a whole one.
#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "etcd_client.h"
#include "etcd_cluster.h"
#include "etcd_keyspace.h"
#include "record_changes.h"
#include "snapshot_reader.h"
#include "syncd_fixtures.h"

using namespace keyauth;
using namespace keyauth::syncd;
using keyauth::testing::EtcdCluster;
namespace kt = keyauth::testing;

namespace {

const std::string kPrefix = "/keyauth/1";

std::unique_ptr<etcd::Client> connect(const EtcdCluster &etcd) {
    etcd::ClientOptions o;
    o.endpoints = etcd.endpoint_list();
    o.request_timeout = std::chrono::milliseconds(2000);
    std::string error;
    auto c = etcd::Client::make(o, error);
    EXPECT_NE(c, nullptr) << error;
    return c;
}

int64_t put(etcd::Client &c, Table table, const std::string &key, const std::string &value) {
    etcd::PutResponse out;
    etcd::Status s = c.put({etcd_record_key(kPrefix, table, key), value}, out);
    EXPECT_TRUE(s.ok()) << s.message;
    return out.header.revision;
}

// Accounts and keys whose hashes start with several bytes (so several of the
// 256 keys_by_hash ranges hold keys), three keys a byte.
int64_t populate(etcd::Client &c) {
    int64_t rev = 0;
    for (unsigned a = 1; a <= 3; ++a) rev = put(c, Table::kAccounts, kt::id_bytes(kt::test_id(a)), kt::account_record("a"));
    for (unsigned byte : {0u, 1u, 7u, 128u, 254u}) {
        for (unsigned i = 0; i < 3; ++i) {
            const unsigned key = byte * 256 + i;
            rev = put(c, Table::kKeysByHash, kt::test_hash(key), kt::key_record(key, 1 + i));
        }
    }
    rev = put(c, Table::kPlans, "basic", kt::plan_record("basic", 49900));
    return rev;
}

using Record = std::tuple<int, std::string, std::optional<std::string>>;
Record record(const RecordChange &ch) { return {static_cast<int>(ch.table), ch.key, ch.value}; }

// What reading the ranges one after the other, page by page, gives.
std::vector<Record> read_serially(etcd::Client &c) {
    std::vector<Record> out;
    for (const etcd::RangeRequest &range : snapshot_ranges(kPrefix)) {
        etcd::Status s = c.range_all(range, 1000, [&](const etcd::RangeResponse &page) {
            for (const RecordChange &ch : batch_of_kvs(kPrefix, page.kvs).changes) out.push_back(record(ch));
            return true;
        });
        EXPECT_TRUE(s.ok()) << s.message;
    }
    return out;
}

// One member holding populate()'s records, and a client of it.
class SyncdSnapshotReader : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(etcd.ok()) << etcd.error();
        c = connect(etcd);
        ASSERT_NE(c, nullptr);
        populated = populate(*c);
    }
    EtcdCluster etcd{1};
    std::unique_ptr<etcd::Client> c;
    int64_t populated = 0;
    std::atomic<bool> stop{false};
};

// The records in a canonical order: two readers hand in whole ranges in the
// order they finish them.
std::vector<Record> sorted(std::vector<Record> v) {
    std::sort(v.begin(), v.end());
    return v;
}

TEST_F(SyncdSnapshotReader, ReadsEveryRangeAtTheFirstPagesRevision) {
    const std::vector<Record> expected = read_serially(*c);
    ASSERT_EQ(expected.size(), 3u + 15u + 1u);

    auto reader_client = connect(etcd);
    auto second_client = connect(etcd);
    for (auto [ahead, readers] : {std::pair<size_t, size_t>{1, 1}, {4, 1}, {1, 2}, {4, 2}}) {
        std::vector<etcd::Client *> clients = {reader_client.get()};
        if (readers == 2) clients.push_back(second_client.get());
        SnapshotReader reader(clients, kPrefix, /*page_size=*/2, stop, ahead);
        std::vector<Record> got;
        std::optional<Batch> first = reader.next();
        ASSERT_TRUE(first);
        for (const RecordChange &ch : first->changes) got.push_back(record(ch));
        // written after the first page: in no page of this snapshot, not
        // even of a range not read yet
        const int64_t later = put(*c, Table::kKeysByHash, kt::test_hash(254 * 256 + 9), kt::key_record(9, 1));
        put(*c, Table::kKeysByHash, kt::test_hash(128 * 256 + 0), kt::key_record(0, 1, /*revoked=*/true));
        size_t pages = 1;
        while (std::optional<Batch> b = reader.next()) {
            EXPECT_LE(b->changes.size(), 2u);
            for (const RecordChange &ch : b->changes) got.push_back(record(ch));
            pages++;
        }
        EXPECT_TRUE(reader.status().ok()) << reader.status().message;
        if (readers == 1) {
            EXPECT_EQ(got, expected) << "one reader reads the ranges in order; ahead " << ahead;
        } else {
            EXPECT_EQ(sorted(got), sorted(expected)) << "ahead " << ahead;
        }
        EXPECT_GE(pages, 10u);
        EXPECT_GE(reader.revision(), populated);
        EXPECT_LT(reader.revision(), later);
        // the next snapshot has them: the reader is not reading a copy
        SnapshotReader again(clients, kPrefix, 1000, stop);
        size_t records = 0;
        while (std::optional<Batch> b = again.next()) records += b->changes.size();
        EXPECT_EQ(records, expected.size() + 1);
        EXPECT_GE(again.revision(), later);
        // back to the first state for the next round
        etcd::DeleteRangeRequest d;
        d.key = etcd_record_key(kPrefix, Table::kKeysByHash, kt::test_hash(254 * 256 + 9));
        etcd::DeleteRangeResponse dr;
        ASSERT_TRUE(c->delete_range(d, dr).ok());
        put(*c, Table::kKeysByHash, kt::test_hash(128 * 256 + 0), kt::key_record(128 * 256 + 0, 1));
        ASSERT_EQ(read_serially(*c), expected);
    }
}

TEST_F(SyncdSnapshotReader, DroppedOrStoppedMidwayItEndsAndTheClientIsFree) {
    {
        SnapshotReader reader({c.get()}, kPrefix, 1, stop, 1);
        ASSERT_TRUE(reader.next());
    }  // dropped with pages left: the destructor returns
    etcd::RangeResponse r;
    etcd::RangeRequest all;
    all.key = watched_prefix(kPrefix);
    all.range_end = watched_end(kPrefix);
    ASSERT_TRUE(c->range(all, r).ok()) << "the client is usable again";

    auto second = connect(etcd);
    SnapshotReader reader({c.get(), second.get()}, kPrefix, 1, stop, 1);
    ASSERT_TRUE(reader.next());
    stop = true;  // the sync loop stopping: at most the pages read ahead follow
    size_t after = 0;
    while (reader.next()) after++;
    EXPECT_LE(after, 1u);
    EXPECT_EQ(reader.status().code, etcd::Errc::kCanceled) << "a stopped read is never a whole snapshot";
}

TEST_F(SyncdSnapshotReader, AMemberGoneMidwayIsAnErrorNotAShortSnapshot) {
    auto second = connect(etcd);
    SnapshotReader reader({c.get(), second.get()}, kPrefix, 1, stop, 1);
    ASSERT_TRUE(reader.next());
    etcd.kill(0);
    size_t records = 1;
    while (std::optional<Batch> b = reader.next()) records += b->changes.size();
    EXPECT_LT(records, 19u);
    EXPECT_FALSE(reader.status().ok()) << "after " << records << " records";
}

}  // namespace
