// The sync loop's tests' shared pieces: a prefix in a real etcd, populated as
// the etcd backend writes it, a SyncLoop on its own thread, and the check
// that a store mirrors etcd exactly (tests/syncd_loop_test.cc,
// tests/syncd_catch_up_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcd_client.h"
#include "etcd_cluster.h"
#include "etcd_keyspace.h"
#include "mirror.h"
#include "record_changes.h"
#include "sync_loop.h"
#include "syncd_fixtures.h"
#include "syncd_metrics.h"
#include "temp_dir.h"

namespace keyauth::testing::syncd_loop {

using namespace keyauth::syncd;
namespace kt = keyauth::testing;

inline const std::string kPrefix = "/keyauth/1";

inline std::unique_ptr<etcd::Client> connect(const EtcdCluster &etcd) {
    etcd::ClientOptions o;
    o.endpoints = etcd.endpoint_list();
    std::string error;
    auto c = etcd::Client::make(o, error);
    EXPECT_NE(c, nullptr) << error;
    return c;
}

// Puts a record (value) or deletes it (none); returns the revision.
inline int64_t write(etcd::Client &c, Table table, const std::string &key, std::optional<std::string> value) {
    const std::string k = etcd_record_key(kPrefix, table, key);
    if (value) {
        etcd::PutResponse out;
        etcd::Status s = c.put({k, *value}, out);
        EXPECT_TRUE(s.ok()) << s.message;
        return out.header.revision;
    }
    etcd::DeleteRangeResponse out;
    etcd::DeleteRangeRequest d;
    d.key = k;
    etcd::Status s = c.delete_range(d, out);
    EXPECT_TRUE(s.ok()) << s.message;
    return out.header.revision;
}

inline int64_t put_raw(etcd::Client &c, const std::string &key, const std::string &value) {
    etcd::PutResponse out;
    etcd::Status s = c.put({key, value}, out);
    EXPECT_TRUE(s.ok()) << s.message;
    return out.header.revision;
}

// Several records in one etcd txn (one revision), as the etcd backend writes.
inline int64_t write_txn(etcd::Client &c, const std::vector<RecordChange> &changes) {
    etcd::TxnRequest t;
    for (const RecordChange &ch : changes) {
        const std::string k = etcd_record_key(kPrefix, ch.table, ch.key);
        if (ch.value) {
            t.success.push_back(etcd::PutRequest{k, *ch.value});
        } else {
            etcd::DeleteRangeRequest d;
            d.key = k;
            t.success.push_back(d);
        }
    }
    etcd::TxnResponse out;
    etcd::Status s = c.txn(t, out);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(out.succeeded);
    return out.header.revision;
}

// Every record the prefix holds, as the changes syncd would apply, in key
// order (the order a range reads them).
inline std::vector<RecordChange> etcd_records(etcd::Client &c) {
    etcd::RangeRequest r;
    r.key = watched_prefix(kPrefix);
    r.range_end = watched_end(kPrefix);
    std::vector<RecordChange> out;
    etcd::Status s = c.range_all(r, 1000, [&](const etcd::RangeResponse &page) {
        Batch b = batch_of_kvs(kPrefix, page.kvs);
        out.insert(out.end(), b.changes.begin(), b.changes.end());
        return true;
    });
    EXPECT_TRUE(s.ok()) << s.message;
    return out;
}

// The store must hold exactly what applying etcd's records gives (derived
// tables included), and each primary record with etcd's bytes.
inline void expect_mirrors(etcd::Client &c, Mirror &m) {
    ASSERT_NE(m.env(), nullptr);
    const std::vector<RecordChange> records = etcd_records(c);
    const Dump mine = kt::dump_env(m.env());
    for (const RecordChange &r : records) {
        auto table = mine.find(table_name(r.table));
        ASSERT_NE(table, mine.end());
        auto it = table->second.find(r.key);
        ASSERT_NE(it, table->second.end()) << table_name(r.table) << " record missing";
        EXPECT_EQ(it->second, *r.value) << table_name(r.table) << " record differs";
    }
    TempDir ref;
    EXPECT_EQ(kt::without_mark(mine), kt::applied(records, ref.sub("db")));
}

// A SyncLoop on its own thread; stopped and joined when it goes.
class Running {
public:
    Running(const EtcdCluster &etcd, Mirror &mirror, Metrics &metrics,
            const std::function<void(SyncOptions &)> &tweak = {}) {
        SyncOptions o;
        o.etcd.endpoints = etcd.endpoint_list();
        o.prefix = kPrefix;
        o.page_size = 7;  // several pages, several chunks
        if (tweak) tweak(o);
        std::string error;
        loop_ = SyncLoop::make(o, mirror, metrics, error);
        EXPECT_NE(loop_, nullptr) << error;
        if (loop_) thread_ = std::thread([this] { loop_->run(); });
    }
    ~Running() { stop(); }
    void stop() {
        if (loop_) loop_->stop();
        if (thread_.joinable()) thread_.join();
    }

private:
    std::unique_ptr<SyncLoop> loop_;
    std::thread thread_;
};

// A populated prefix: accounts, keys, a token, plans, meta records, and what
// syncd must skip (the etcd backend's own last/ and index records, a meta
// name of the environment).
inline int64_t populate(etcd::Client &c, unsigned accounts, unsigned keys_per_account) {
    int64_t rev = 0;
    for (unsigned a = 1; a <= accounts; ++a) {
        rev = write(c, Table::kAccounts, kt::id_bytes(kt::test_id(a)), kt::account_record("acct " + std::to_string(a)));
        for (unsigned k = 0; k < keys_per_account; ++k) {
            unsigned key = a * 100 + k;
            rev = write(c, Table::kKeysByHash, kt::test_hash(key), kt::key_record(key, a));
            // the etcd backend's own index records: never applied as they are
            rev = write(c, Table::kKeys, kt::id_bytes(kt::test_id(key)), "not a hash");
            rev = write(c, Table::kAccountKeys, kt::id_bytes(kt::test_id(a)) + kt::id_bytes(kt::test_id(key)),
                        "not a hash either");
        }
    }
    rev = write(c, Table::kConsoleTokens, kt::test_hash(7777), encode_token_record(TokenRecord{kt::test_id(1), 0}));
    rev = write(c, Table::kPlans, "basic", kt::plan_record("basic", 49900));
    rev = write(c, Table::kPlans, "pro", kt::plan_record("pro", 99900));
    rev = write(c, Table::kMeta, KA_META_CATALOG_VERSION, kt::u64_le(2));
    rev = write(c, Table::kMeta, KA_META_FX_USD_INR, encode_fx_record(FxRecord{83123456, 1'760'000'000'000}));
    rev = write(c, Table::kMeta, KA_META_SCHEMA_VERSION, std::string("\x63\0\0\0", 4));
    rev = write(c, Table::kMeta, KA_META_SYNCD_REVISION, kt::u64_le(1));
    rev = put_raw(c, etcd_last_key_record(kPrefix, Table::kKeys), "last");
    return rev;
}

// What syncd must never let through as it came.
inline void expect_skipped_records_absent(Mirror &m) {
    const Dump d = kt::dump_env(m.env());
    for (const auto &[key, value] : d.at(KA_DB_KEYS)) {
        EXPECT_NE(value, "not a hash");
        EXPECT_EQ(value.size(), static_cast<size_t>(KA_HASH_LEN));
    }
    for (const auto &[key, value] : d.at(KA_DB_ACCOUNT_KEYS)) EXPECT_NE(value, "not a hash either");
    EXPECT_EQ(d.at(KA_DB_META).at(KA_META_SCHEMA_VERSION), std::string("\x03\0\0\0", 4));
    EXPECT_NE(d.at(KA_DB_META).at(KA_META_SYNCD_REVISION), kt::u64_le(1));
    for (const auto &[table, records] : d) {
        for (const auto &[key, value] : records) EXPECT_NE(value, "last") << table;
    }
}

inline HttpRequest healthz() {
    HttpRequest r;
    r.method = "GET";
    r.path = "/healthz";
    return r;
}

// The status of test key `key` in a dumped store; 0xff if unreadable.
inline int key_status(const Dump &d, unsigned key) {
    const std::string &stored = d.at(KA_DB_KEYS_BY_HASH).at(kt::test_hash(key));
    KeyRecordView v;
    if (decode_key_record(stored.data(), stored.size(), v) != DecodeStatus::kOk) return 0xff;
    return v.status;
}

inline bool applied_at_least(const Metrics &m, int64_t revision) {
    return m.complete() && m.applied_revision() >= revision;
}

}  // namespace keyauth::testing::syncd_loop
