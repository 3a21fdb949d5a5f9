// key_slots, the hot table and the store's index by hash: its codecs, and
// that the writers keep it equal to what key_records holds through puts,
// revocations, deletions, growth and shrinking, refusing a second key of a
// fingerprint, with the edge's lookup finding every key.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "edge_store.h"
#include "key_slots.h"
#include "key_slots_writer.h"
#include "le.h"
#include "lmdb_apply.h"
#include "lmdb_backend.h"
#include "store_error.h"
#include "syncd_fixtures.h"
#include "temp_dir.h"

namespace keyauth {
namespace {

namespace kt = keyauth::testing;

KeyRecordView view_of(const std::string &record) {
    KeyRecordView v;
    EXPECT_EQ(decode_key_record(record.data(), record.size(), v), DecodeStatus::kOk);
    return v;
}

const unsigned char *bytes(const std::string &s) { return reinterpret_cast<const unsigned char *>(s.data()); }

TEST(KeySlotsHeader, RoundTripsAndRefusesWhatTheLookupCannotTrust) {
    KeySlotsHeader h;
    h.chunk_slots = kChunkSlots;
    h.capacity = 5000;
    h.slots = 6 * kChunkSlots;
    h.count = 17;
    h.max_probe = 3;
    std::string bytes = encode_key_slots_header(h);
    ASSERT_EQ(bytes.size(), static_cast<size_t>(KA_KEY_SLOTS_HEADER_SIZE));
    KeySlotsHeader back;
    ASSERT_EQ(decode_key_slots_header(bytes.data(), bytes.size(), back), DecodeStatus::kOk);
    EXPECT_EQ(back.capacity, 5000u);
    EXPECT_EQ(back.slots, 6u * kChunkSlots);
    EXPECT_EQ(back.count, 17u);
    EXPECT_EQ(back.max_probe, 3u);

    std::string unknown = bytes;
    unknown[0] = 9;
    EXPECT_EQ(decode_key_slots_header(unknown.data(), unknown.size(), back), DecodeStatus::kUnknownVersion);
    EXPECT_EQ(back.version, 9u);
    auto corrupt = [&](size_t at, uint64_t value, size_t width) {
        std::string b = bytes;
        for (size_t i = 0; i < width; i++) b[at + i] = static_cast<char>(value >> (8 * i));
        KeySlotsHeader out;
        return decode_key_slots_header(b.data(), b.size(), out);
    };
    EXPECT_EQ(corrupt(2, 32, 2), DecodeStatus::kCorrupt);                  // slot size
    EXPECT_EQ(corrupt(4, 0, 4), DecodeStatus::kCorrupt);                   // no chunk slots
    EXPECT_EQ(corrupt(8, 6 * kChunkSlots, 8), DecodeStatus::kCorrupt);    // no tail past capacity
    EXPECT_EQ(corrupt(16, 6 * kChunkSlots + 1, 8), DecodeStatus::kCorrupt);  // not whole chunks
    EXPECT_EQ(corrupt(32, 0, 4), DecodeStatus::kCorrupt);                  // no probe
    EXPECT_EQ(corrupt(32, KA_KEY_SLOTS_MAX_PROBE + 1, 4), DecodeStatus::kCorrupt);
    EXPECT_EQ(decode_key_slots_header(bytes.data(), bytes.size() - 1, back), DecodeStatus::kCorrupt);
}

TEST(KeySlot, AKeyThatFitsIsInlineWithEveryFieldTheEdgeReads) {
    std::string hash = kt::test_hash(7);
    KeyRecord r = KeyRecord{};
    r.status = KA_KEY_ACTIVE;
    r.requested_rpm = 1234;
    r.key_id = kt::test_id(5);
    r.account_id = kt::test_id(6);
    r.expires_ms = 1'900'000'000'123;
    r.scopes = {"ip:read"};
    r.prefix = "ka_x";
    r.name = "a name that a slot has no room for";
    std::string rec = encode_key_record(r);
    unsigned char slot[KA_KEY_SLOT_SIZE];
    encode_key_slot(bytes(hash), view_of(rec), slot);
    EXPECT_EQ(slot_state(slot), KA_SLOT_INLINE);
    KeyRecordView v;
    ASSERT_EQ(decode_key_slot(slot, v), DecodeStatus::kOk);
    EXPECT_EQ(v.status, KA_KEY_ACTIVE);
    EXPECT_EQ(v.requested_rpm, 1234u);
    EXPECT_EQ(v.expires_ms, 1'900'000'000'123);
    EXPECT_EQ(std::memcmp(v.key_id, r.key_id.data(), KA_ID_LEN), 0);
    EXPECT_EQ(std::memcmp(v.rate_id, r.key_id.data(), KA_ID_LEN), 0);
    EXPECT_EQ(std::memcmp(v.account_id, r.account_id.data(), KA_ID_LEN), 0);
    EXPECT_TRUE(v.grants("ip:read"));
    EXPECT_FALSE(v.grants("ip:write"));
    EXPECT_EQ(std::memcmp(slot_fingerprint(slot), hash.data(), KA_KEY_SLOT_FINGERPRINT), 0);
}

TEST(KeySlot, WhatDoesNotFitSendsTheEdgeToTheRecord) {
    std::string hash = kt::test_hash(8);
    auto slot_state_of = [&](KeyRecord r) {
        std::string rec = encode_key_record(r);
        unsigned char slot[KA_KEY_SLOT_SIZE];
        encode_key_slot(bytes(hash), view_of(rec), slot);
        return slot_state(slot);
    };
    KeyRecord base;
    base.key_id = kt::test_id(1);
    base.account_id = kt::test_id(2);
    base.scopes = {"ip:read"};
    EXPECT_EQ(slot_state_of(base), KA_SLOT_INLINE);
    KeyRecord two_scopes = base;
    two_scopes.scopes = {"ip:read", "geo:read"};
    EXPECT_EQ(slot_state_of(two_scopes), KA_SLOT_IN_RECORD);
    KeyRecord rolled = base;
    rolled.rate_id = kt::test_id(3);
    EXPECT_EQ(slot_state_of(rolled), KA_SLOT_IN_RECORD);
    KeyRecord far = base;
    far.expires_ms = int64_t{1} << 50;
    EXPECT_EQ(slot_state_of(far), KA_SLOT_IN_RECORD);
}

TEST(KeySlot, ACorruptSlotIsRefused) {
    std::string rec = kt::key_record(1, 2);
    std::string hash = kt::test_hash(9);
    unsigned char slot[KA_KEY_SLOT_SIZE];
    encode_key_slot(bytes(hash), view_of(rec), slot);
    KeyRecordView v;
    unsigned char bad[KA_KEY_SLOT_SIZE];
    std::memcpy(bad, slot, sizeof bad);
    bad[3] = KA_KEY_SLOT_SCOPE_BYTES + 1;  // scopes past the slot
    EXPECT_EQ(decode_key_slot(bad, v), DecodeStatus::kCorrupt);
    std::memcpy(bad, slot, sizeof bad);
    bad[2] = 2;  // two scopes in the bytes of one
    EXPECT_EQ(decode_key_slot(bad, v), DecodeStatus::kCorrupt);
    std::memcpy(bad, slot, sizeof bad);
    bad[1] = 7;  // no such status
    EXPECT_EQ(decode_key_slot(bad, v), DecodeStatus::kCorrupt);
}

// A store written through apply_records, as every writer writes it.
class Table : public ::testing::Test {
protected:
    void apply(const std::vector<RecordChange> &changes) {
        MDB_txn *txn = nullptr;
        ASSERT_EQ(mdb_txn_begin(store().env(), nullptr, 0, &txn), 0);
        apply_records(txn, store().tables(), changes);
        ASSERT_EQ(mdb_txn_commit(txn), 0);
    }
    std::vector<std::string> problems() {
        MDB_txn *txn = nullptr;
        EXPECT_EQ(mdb_txn_begin(store().env(), nullptr, MDB_RDONLY, &txn), 0);
        auto p = check_key_slots(txn, store().tables().key_records, store().tables().key_slots);
        mdb_txn_abort(txn);
        return p;
    }
    KeySlotsHeader header() {
        MDB_txn *txn = nullptr;
        EXPECT_EQ(mdb_txn_begin(store().env(), nullptr, MDB_RDONLY, &txn), 0);
        MDB_val k{6, const_cast<char *>(KA_KEY_SLOTS_HEADER_KEY)}, v;
        KeySlotsHeader h;
        EXPECT_EQ(mdb_get(txn, store().tables().key_slots, &k, &v), 0);
        EXPECT_EQ(decode_key_slots_header(v.mv_data, v.mv_size, h), DecodeStatus::kOk);
        mdb_txn_abort(txn);
        return h;
    }
    // What the edge reads for this hash: the slot's state (IN_RECORD when it
    // read keys_by_hash), or 0 when absent; the key copied out before the
    // snapshot its views point into goes.
    int edge_sees(const std::string &hash, KeyRecord &key) {
        store();  // a store made, as a writer makes it
        store_.reset();
        std::string err;
        auto edge = EdgeStore::open(dir_.sub("db"), err);
        EXPECT_TRUE(edge) << err;
        EdgeStore::Snapshot snap(*edge);
        EXPECT_EQ(snap.begin(), 0);
        auto found = snap.find_key(bytes(hash));
        EXPECT_EQ(found.problem, nullptr);
        if (found.rc == MDB_NOTFOUND) return 0;
        EXPECT_EQ(found.rc, 0);
        KeyRecordView v;
        const DecodeStatus st = found.slot ? decode_key_slot(found.slot, v)
                                           : decode_key_record(found.record.data(), found.record.size(), v);
        EXPECT_EQ(st, DecodeStatus::kOk);
        key = v.to_owned();
        return found.slot ? KA_SLOT_INLINE : KA_SLOT_IN_RECORD;
    }

    // Writes bytes into key_slots behind the writers' back (a damaged file).
    void put_slots_record(const std::string &key, const std::string &value) {
        MDB_txn *txn = nullptr;
        ASSERT_EQ(mdb_txn_begin(store().env(), nullptr, 0, &txn), 0);
        MDB_val k{key.size(), const_cast<char *>(key.data())}, v{value.size(), const_cast<char *>(value.data())};
        ASSERT_EQ(mdb_put(txn, store().tables().key_slots, &k, &v, 0), 0);
        ASSERT_EQ(mdb_txn_commit(txn), 0);
    }
    // The edge's lookup of a hash; the pointers of the answer are not kept.
    EdgeStore::Snapshot::KeyLookup edge_lookup(const std::string &hash) {
        store_.reset();
        std::string err;
        auto edge = EdgeStore::open(dir_.sub("db"), err);
        EXPECT_TRUE(edge) << err;
        if (!edge) return {};
        EdgeStore::Snapshot snap(*edge);
        EXPECT_EQ(snap.begin(), 0);
        auto found = snap.find_key(bytes(hash));
        found.slot = nullptr;
        found.record = {};
        return found;
    }

    // The writer's environment, closed while the edge reads: LMDB wants one
    // environment of a store per process.
    LmdbBackend &store() {
        if (!store_) store_.emplace(dir_.sub("db"));
        return *store_;
    }

    kt::TempDir dir_;
    std::optional<LmdbBackend> store_;
};

std::string random_hash(std::mt19937_64 &rng) {
    std::string h(KA_HASH_LEN, '\0');
    for (char &c : h) c = static_cast<char>(rng());
    return h;
}

TEST_F(Table, ANewStoreHasAnEmptyTable) {
    EXPECT_TRUE(problems().empty());
    EXPECT_EQ(header().count, 0u);
    KeyRecord v;
    EXPECT_EQ(edge_sees(kt::test_hash(1), v), 0);
}

TEST_F(Table, RandomPutsRevocationsAndDeletesKeepEveryKeyFindable) {
    std::mt19937_64 rng(17);
    std::map<std::string, unsigned> live;  // hash -> key number
    unsigned next = 1;
    uint64_t largest = 0;
    for (int round = 0; round < 30; round++) {
        std::vector<RecordChange> batch;
        // grow fast, then shrink: past both rebuild thresholds
        const int puts = round < 20 ? 200 : 0;
        for (int i = 0; i < puts; i++) {
            std::string h = random_hash(rng);
            batch.push_back({keyauth::Table::kKeysByHash, h, kt::key_record(next, 1)});
            live[h] = next++;
        }
        for (auto it = live.begin(); it != live.end();) {
            const uint64_t r = rng() % 100;
            if (r < (round < 20 ? 5u : 40u)) {
                batch.push_back({keyauth::Table::kKeysByHash, it->first, std::nullopt});
                it = live.erase(it);
            } else {
                if (r < 10) batch.push_back({keyauth::Table::kKeysByHash, it->first, kt::key_record(it->second, 1, true)});
                ++it;
            }
        }
        apply(batch);
        ASSERT_EQ(problems(), std::vector<std::string>{}) << "round " << round;
        largest = std::max(largest, header().capacity);
        EXPECT_EQ(header().count, live.size());
    }
    EXPECT_GT(largest, 3000u);              // it grew
    EXPECT_LT(header().capacity, largest);  // and shrank when most keys went
    for (const auto &[hash, n] : live) {
        KeyRecord v;
        ASSERT_EQ(edge_sees(hash, v), KA_SLOT_INLINE);
        EXPECT_EQ(std::memcmp(v.key_id.data(), kt::test_id(n).data(), KA_ID_LEN), 0);
    }
    KeyRecord v;
    EXPECT_EQ(edge_sees(random_hash(rng), v), 0);
}

TEST_F(Table, ARevocationIsInTheSlotTheEdgeReads) {
    std::string h = kt::test_hash(3);
    apply({{keyauth::Table::kKeysByHash, h, kt::key_record(3, 1)}});
    KeyRecord v;
    ASSERT_EQ(edge_sees(h, v), KA_SLOT_INLINE);
    EXPECT_EQ(v.status, KA_KEY_ACTIVE);
    apply({{keyauth::Table::kKeysByHash, h, kt::key_record(3, 1, true)}});
    ASSERT_EQ(edge_sees(h, v), KA_SLOT_INLINE);
    EXPECT_EQ(v.status, KA_KEY_REVOKED);
    apply({{keyauth::Table::kKeysByHash, h, std::nullopt}});
    EXPECT_EQ(edge_sees(h, v), 0);
    EXPECT_TRUE(problems().empty());
}

TEST_F(Table, AKeyThatDoesNotFitIsReadByItsIdAndItsWholeHash) {
    std::string a = kt::test_hash(4);
    KeyRecord wide = view_of(kt::key_record(4, 1)).to_owned();
    wide.scopes = {"ip:read", "dns:write"};  // more than a slot holds
    apply({{keyauth::Table::kKeysByHash, a, encode_key_record(wide)}});
    EXPECT_TRUE(problems().empty());
    KeyRecord v;
    ASSERT_EQ(edge_sees(a, v), KA_SLOT_IN_RECORD);
    EXPECT_EQ(std::memcmp(v.key_id.data(), kt::test_id(4).data(), KA_ID_LEN), 0);
    EXPECT_EQ(v.scopes, wide.scopes);
    std::string c = a;
    c[KA_HASH_LEN - 1] = 'y';  // the slot's fingerprint, not the key's hash
    EXPECT_EQ(edge_sees(c, v), 0);
}

TEST_F(Table, ASecondKeyOfAFingerprintIsRefusedAndNothingOfItsBatchIsWritten) {
    std::string a = kt::test_hash(4), b = a, c = kt::test_hash(6);
    b[KA_HASH_LEN - 1] = 'x';  // the same first 16 bytes, another hash
    apply({{keyauth::Table::kKeysByHash, a, kt::key_record(4, 1)}});
    for (const auto &batch : {std::vector<RecordChange>{{keyauth::Table::kKeysByHash, c, kt::key_record(6, 1)},
                                                        {keyauth::Table::kKeysByHash, b, kt::key_record(5, 1)}}}) {
        MDB_txn *txn = nullptr;
        ASSERT_EQ(mdb_txn_begin(store().env(), nullptr, 0, &txn), 0);
        EXPECT_THROW(apply_records(txn, store().tables(), batch), StoreError);
        mdb_txn_abort(txn);
    }
    // both new in one batch: refused alike
    std::string d = kt::test_hash(7), e = d;
    e[KA_HASH_LEN - 1] = 'x';
    MDB_txn *txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(store().env(), nullptr, 0, &txn), 0);
    EXPECT_THROW(apply_records(txn, store().tables(), {{keyauth::Table::kKeysByHash, d, kt::key_record(7, 1)},
                                                      {keyauth::Table::kKeysByHash, e, kt::key_record(8, 1)}}),
                 StoreError);
    mdb_txn_abort(txn);
    EXPECT_TRUE(problems().empty());
    EXPECT_EQ(header().count, 1u);
    KeyRecord v;
    ASSERT_EQ(edge_sees(a, v), KA_SLOT_INLINE);
    EXPECT_EQ(std::memcmp(v.key_id.data(), kt::test_id(4).data(), KA_ID_LEN), 0);
    // an INLINE slot is the key of its 128-bit fingerprint (SCHEMA.md): b
    // is a's slot, not a key of its own
    ASSERT_EQ(edge_sees(b, v), KA_SLOT_INLINE);
    EXPECT_EQ(std::memcmp(v.key_id.data(), kt::test_id(4).data(), KA_ID_LEN), 0);
    EXPECT_EQ(edge_sees(c, v), 0);
    EXPECT_EQ(edge_sees(d, v), 0);
}

TEST_F(Table, AKeyIdHeldByAnotherHashIsRefused) {
    apply({{keyauth::Table::kKeysByHash, kt::test_hash(1), kt::key_record(1, 1)}});
    MDB_txn *txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(store().env(), nullptr, 0, &txn), 0);
    EXPECT_THROW(apply_records(txn, store().tables(), {{keyauth::Table::kKeysByHash, kt::test_hash(2), kt::key_record(1, 1)}}),
                 StoreError);
    mdb_txn_abort(txn);
    EXPECT_TRUE(problems().empty());
    KeyRecord v;
    EXPECT_EQ(edge_sees(kt::test_hash(2), v), 0);
    EXPECT_EQ(edge_sees(kt::test_hash(1), v), KA_SLOT_INLINE);
}

TEST_F(Table, ABatchLargerThanTheTableRebuildsItInOneTransaction) {
    std::mt19937_64 rng(5);
    std::vector<RecordChange> batch;
    for (unsigned i = 1; i <= 20000; i++) batch.push_back({keyauth::Table::kKeysByHash, random_hash(rng), kt::key_record(i, 1)});
    apply(batch);
    EXPECT_TRUE(problems().empty());
    const KeySlotsHeader h = header();
    EXPECT_EQ(h.count, 20000u);
    EXPECT_GE(static_cast<double>(h.capacity), 20000 / 0.75);
    EXPECT_LE(h.max_probe, 64u);
}

TEST_F(Table, ADamagedChunkIsFoundByTheCheckAndFailsTheEdgeClosed) {
    std::string h = kt::test_hash(6);
    apply({{keyauth::Table::kKeysByHash, h, kt::key_record(6, 1)}});
    unsigned char key[4];
    chunk_key(home_slot(bytes(h), header().capacity) / kChunkSlots, key);
    put_slots_record(std::string(reinterpret_cast<char *>(key), sizeof key), "torn chunk");
    EXPECT_FALSE(problems().empty());
    const auto found = edge_lookup(h);
    EXPECT_NE(found.problem, nullptr);
    EXPECT_EQ(found.rc, MDB_CORRUPTED);
}

TEST_F(Table, AnUnknownTableLayoutFailsTheEdgeClosed) {
    std::string h = kt::test_hash(6);
    apply({{keyauth::Table::kKeysByHash, h, kt::key_record(6, 1)}});
    std::string b = encode_key_slots_header(header());
    b[0] = 7;
    put_slots_record(KA_KEY_SLOTS_HEADER_KEY, b);
    const auto found = edge_lookup(h);
    ASSERT_NE(found.problem, nullptr);
    EXPECT_EQ(found.version, 7u);
}

}  // namespace
}  // namespace keyauth
