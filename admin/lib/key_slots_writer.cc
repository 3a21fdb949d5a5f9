#include "key_slots_writer.h"

#include <lmdb++.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>

#include "key_slots.h"
#include "lmdb_keys.h"
#include "records.h"
#include "store_error.h"

namespace keyauth {
namespace {

using Slot = std::array<unsigned char, KA_KEY_SLOT_SIZE>;

constexpr uint64_t kMinCapacity = 1024;
// Sized to 72% full, rebuilt past 88% (or under 20%): a lookup reads two to
// five slots (contiguous: one or two cache misses), and the table costs 73
// to 89 bytes a key.
constexpr double kFillAfterRebuild = 0.72;
constexpr double kFillMax = 0.88;
constexpr double kFillMin = 0.20;

MDB_val val(const void *p, size_t n) { return MDB_val{n, const_cast<void *>(p)}; }
MDB_val val(std::string_view s) { return val(s.data(), s.size()); }

struct Cursor {
    MDB_cursor *c = nullptr;
    Cursor(MDB_txn *txn, MDB_dbi dbi) {
        int rc = mdb_cursor_open(txn, dbi, &c);
        if (rc != 0) lmdb::error::raise("mdb_cursor_open", rc);
    }
    ~Cursor() { mdb_cursor_close(c); }
    bool get(MDB_val &k, MDB_val &v, MDB_cursor_op op) { return lmdb::cursor_get(c, &k, &v, op); }
};

// The slot of one stored key: INLINE if its record decodes and its fields
// fit, else IN_RECORD naming its id (the edge then reads the record, and
// refuses one that does not decode).
Slot slot_of(const StoredKey &key, std::string_view id) {
    Slot s;
    const auto *hash = reinterpret_cast<const unsigned char *>(key.hash.data());
    KeyRecordView view;
    if (decode_key_record(key.record.data(), key.record.size(), view) == DecodeStatus::kOk &&
        std::memcmp(view.key_id, id.data(), KA_ID_LEN) == 0) {
        encode_key_slot(hash, view, s.data());
    } else {
        encode_in_record_slot(hash, reinterpret_cast<const unsigned char *>(id.data()), s.data());
    }
    return s;
}

std::string_view id_of_slot(const unsigned char *slot) {
    return {reinterpret_cast<const char *>(slot_key_id(slot)), KA_ID_LEN};
}

[[noreturn]] void shared_fingerprint() {
    throw StoreError(StoreError::Kind::kInvalid, "",
                     "two keys share the first 128 bits of their hash: the new one is refused");
}

std::optional<KeySlotsHeader> read_header(MDB_txn *txn, MDB_dbi key_slots) {
    MDB_val k = val(std::string_view(KA_KEY_SLOTS_HEADER_KEY)), v;
    KeySlotsHeader h;
    if (!lmdb::dbi_get(txn, key_slots, &k, &v) ||
        decode_key_slots_header(v.mv_data, v.mv_size, h) != DecodeStatus::kOk) {
        return std::nullopt;
    }
    return h;
}

void write_header(MDB_txn *txn, MDB_dbi key_slots, const KeySlotsHeader &h) {
    std::string bytes = encode_key_slots_header(h);
    MDB_val k = val(std::string_view(KA_KEY_SLOTS_HEADER_KEY)), v = val(bytes);
    lmdb::dbi_put(txn, key_slots, &k, &v, 0);
}

void put_chunk(MDB_txn *txn, MDB_dbi key_slots, uint64_t n, const std::string &bytes) {
    unsigned char key[4];
    chunk_key(n, key);
    MDB_val k = val(key, sizeof key), v = val(bytes);
    lmdb::dbi_put(txn, key_slots, &k, &v, 0);
}

// Deletes the chunks numbered `from` and up (a table that shrank).
void drop_chunks_from(MDB_txn *txn, MDB_dbi key_slots, uint64_t from) {
    unsigned char key[4];
    chunk_key(from, key);
    Cursor cur(txn, key_slots);
    MDB_val k = val(key, sizeof key), v;
    for (bool ok = cur.get(k, v, MDB_SET_RANGE); ok; ok = cur.get(k, v, MDB_NEXT)) {
        if (k.mv_size != 4) continue;  // the header
        int rc = mdb_cursor_del(cur.c, 0);
        if (rc != 0) lmdb::error::raise("mdb_cursor_del", rc);
    }
}

KeySlotsHeader sized_for(uint64_t keys, uint64_t capacity) {
    KeySlotsHeader h;
    h.chunk_slots = kChunkSlots;
    h.capacity = std::max<uint64_t>({kMinCapacity, capacity,
                                     static_cast<uint64_t>(static_cast<double>(keys) / kFillAfterRebuild)});
    // a tail of at least one chunk past the last home: probes never wrap
    h.slots = ((h.capacity + kChunkSlots - 1) / kChunkSlots + 1) * kChunkSlots;
    return h;
}

// A key's place in the build: its fingerprint (which orders homes) and id.
struct Entry {
    unsigned char fingerprint[KA_KEY_SLOT_FINGERPRINT];
    char id[KA_ID_LEN];
};

// Every key of key_records by fingerprint (28 bytes a key in memory): the
// records are in creation order, the slots in hash order.
std::vector<Entry> keys_in_hash_order(MDB_txn *txn, MDB_dbi key_records) {
    std::vector<Entry> out;
    Cursor cur(txn, key_records);
    MDB_val k, v;
    for (bool ok = cur.get(k, v, MDB_FIRST); ok; ok = cur.get(k, v, MDB_NEXT)) {
        if (k.mv_size != KA_ID_LEN || v.mv_size < KA_HASH_LEN) continue;  // never written so
        Entry e;
        std::memcpy(e.fingerprint, v.mv_data, sizeof e.fingerprint);
        std::memcpy(e.id, k.mv_data, sizeof e.id);
        out.push_back(e);
    }
    std::sort(out.begin(), out.end(), [](const Entry &a, const Entry &b) {
        return std::memcmp(a.fingerprint, b.fingerprint, sizeof a.fingerprint) < 0;
    });
    for (size_t i = 1; i < out.size(); i++) {
        if (std::memcmp(out[i - 1].fingerprint, out[i].fingerprint, sizeof out[i].fingerprint) == 0)
            shared_fingerprint();
    }
    return out;
}

// One pass in hash order, which is home order: each slot goes to the first
// free one at or after its home, so chunks are written once each, in order.
// False if a slot would land past the probe bound.
bool build(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots, KeySlotsHeader &h,
           const std::vector<Entry> &keys) {
    std::string chunk(h.chunk_bytes(), '\0');
    uint64_t chunk_no = 0, next = 0;
    h.count = 0;
    h.max_probe = 1;
    for (const Entry &e : keys) {
        const std::string_view id(e.id, KA_ID_LEN);
        const std::optional<StoredKey> key = key_by_id(txn, key_records, id);
        if (!key) throw StoreError(StoreError::Kind::kCorrupt, "", "key_records lost a key during a rebuild");
        const Slot slot = slot_of(*key, id);
        const uint64_t home = home_slot(e.fingerprint, h.capacity);
        const uint64_t at = std::max(home, next);
        if (at >= h.slots || at - home + 1 > KA_KEY_SLOTS_MAX_PROBE) return false;
        while (at / h.chunk_slots != chunk_no) {
            put_chunk(txn, key_slots, chunk_no++, chunk);
            std::fill(chunk.begin(), chunk.end(), '\0');
        }
        std::memcpy(&chunk[(at % h.chunk_slots) * KA_KEY_SLOT_SIZE], slot.data(), slot.size());
        next = at + 1;
        h.count++;
        h.max_probe = std::max<uint32_t>(h.max_probe, static_cast<uint32_t>(at - home + 1));
    }
    for (; chunk_no < h.chunks(); chunk_no++) {
        put_chunk(txn, key_slots, chunk_no, chunk);
        std::fill(chunk.begin(), chunk.end(), '\0');
    }
    drop_chunks_from(txn, key_slots, h.chunks());
    write_header(txn, key_slots, h);
    return true;
}

// The chunks an update reads and writes, copied out of LMDB. Hashes are
// taken in order, so their homes only grow and a chunk below the current
// home is final: it is written back then, which bounds the memory held.
class ChunkWindow {
public:
    ChunkWindow(MDB_txn *txn, MDB_dbi key_slots, const KeySlotsHeader &h)
        : txn_(txn), dbi_(key_slots), h_(h) {}

    unsigned char *slot(uint64_t i) {
        const uint64_t n = i / h_.chunk_slots;
        auto it = chunks_.find(n);
        if (it == chunks_.end()) {
            unsigned char key[4];
            chunk_key(n, key);
            MDB_val k = val(key, sizeof key), v;
            if (!lmdb::dbi_get(txn_, dbi_, &k, &v) || v.mv_size != h_.chunk_bytes()) {
                throw StoreError(StoreError::Kind::kCorrupt, "", "key_slots chunk " + std::to_string(n) + " is missing or torn");
            }
            it = chunks_.emplace(n, std::string(static_cast<const char *>(v.mv_data), v.mv_size)).first;
        }
        return reinterpret_cast<unsigned char *>(&it->second[(i % h_.chunk_slots) * KA_KEY_SLOT_SIZE]);
    }

    void write_below(uint64_t chunk_no) {
        while (!chunks_.empty() && chunks_.begin()->first < chunk_no) {
            put_chunk(txn_, dbi_, chunks_.begin()->first, chunks_.begin()->second);
            chunks_.erase(chunks_.begin());
        }
    }

private:
    MDB_txn *txn_;
    MDB_dbi dbi_;
    const KeySlotsHeader &h_;
    std::map<uint64_t, std::string> chunks_;
};

// Empties slot i and moves later slots of the same run back into the hole,
// so that every slot stays reachable from its home without tombstones.
void remove_at(ChunkWindow &w, const KeySlotsHeader &h, uint64_t i) {
    for (uint64_t j = i + 1;; j++) {
        if (j >= h.slots || slot_state(w.slot(j)) == KA_SLOT_EMPTY) break;
        unsigned char *s = w.slot(j);
        if (home_slot(slot_fingerprint(s), h.capacity) <= i) {
            std::memcpy(w.slot(i), s, KA_KEY_SLOT_SIZE);
            i = j;
        }
    }
    std::memset(w.slot(i), 0, KA_KEY_SLOT_SIZE);
}

// False when a slot cannot be placed within the probe bound: rebuild.
// `changes` are in hash order, one a hash.
bool update(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots, KeySlotsHeader &h,
            const std::vector<SlotChange> &changes) {
    ChunkWindow w(txn, key_slots, h);
    for (const SlotChange &c : changes) {
        const auto *hash = reinterpret_cast<const unsigned char *>(c.hash.data());
        std::optional<Slot> want;
        if (c.key_id) {
            if (std::optional<StoredKey> key = key_by_id(txn, key_records, *c.key_id); key && key->hash == c.hash)
                want = slot_of(*key, *c.key_id);
        }
        const uint64_t home = home_slot(hash, h.capacity);
        w.write_below(home / h.chunk_slots);
        uint64_t i = home;
        bool found = false;
        for (; i < h.slots && i - home < KA_KEY_SLOTS_MAX_PROBE; i++) {
            const unsigned char *s = w.slot(i);
            if (slot_state(s) == KA_SLOT_EMPTY) break;
            if (std::memcmp(slot_fingerprint(s), hash, KA_KEY_SLOT_FINGERPRINT) == 0) {
                found = true;
                break;
            }
        }
        if (found && want && id_of_slot(w.slot(i)) != *c.key_id) {
            // the slot's key, if it is still stored, is another hash's
            std::optional<StoredKey> holder = key_by_id(txn, key_records, id_of_slot(w.slot(i)));
            if (holder && holder->hash != c.hash) shared_fingerprint();
        }
        if (found && want) {
            std::memcpy(w.slot(i), want->data(), KA_KEY_SLOT_SIZE);
        } else if (found) {
            remove_at(w, h, i);
            h.count--;
        } else if (want) {
            if (i >= h.slots || i - home >= KA_KEY_SLOTS_MAX_PROBE) return false;
            std::memcpy(w.slot(i), want->data(), KA_KEY_SLOT_SIZE);
            h.count++;
            h.max_probe = std::max<uint32_t>(h.max_probe, static_cast<uint32_t>(i - home + 1));
        }
    }
    w.write_below(h.chunks());
    write_header(txn, key_slots, h);
    return true;
}

void rebuild_at_least(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots, uint64_t capacity) {
    const std::vector<Entry> keys = keys_in_hash_order(txn, key_records);
    KeySlotsHeader h = sized_for(keys.size(), capacity);
    while (!build(txn, key_records, key_slots, h, keys)) h = sized_for(0, h.capacity * 2);
}

}  // namespace

void rebuild_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots) {
    rebuild_at_least(txn, key_records, key_slots, 0);
}

void update_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots, std::vector<SlotChange> changes) {
    if (changes.empty()) return;
    for (const SlotChange &c : changes) {
        if (c.hash.size() != KA_HASH_LEN) throw StoreError(StoreError::Kind::kInvalid, "", "key_slots: a hash of " + std::to_string(c.hash.size()) + " bytes");
    }
    std::optional<KeySlotsHeader> h = read_header(txn, key_slots);
    if (!h || h->version != KA_KEY_SLOTS_V2 ||
        static_cast<double>(h->count + changes.size()) > kFillMax * static_cast<double>(h->capacity)) {
        return rebuild_key_slots(txn, key_records, key_slots);
    }
    // one change a hash, the last given
    std::stable_sort(changes.begin(), changes.end(),
                     [](const SlotChange &a, const SlotChange &b) { return a.hash < b.hash; });
    std::vector<SlotChange> last;
    last.reserve(changes.size());
    for (SlotChange &c : changes) {
        if (!last.empty() && last.back().hash == c.hash) last.back() = std::move(c);
        else last.push_back(std::move(c));
    }
    if (!update(txn, key_records, key_slots, *h, last)) {
        return rebuild_at_least(txn, key_records, key_slots, h->capacity * 2);
    }
    if (h->capacity > kMinCapacity && static_cast<double>(h->count) < kFillMin * static_cast<double>(h->capacity)) {
        rebuild_key_slots(txn, key_records, key_slots);
    }
}

std::vector<std::string> check_key_slots(MDB_txn *txn, MDB_dbi key_records, MDB_dbi key_slots) {
    std::vector<std::string> problems;
    auto problem = [&](std::string what) {
        if (problems.size() < 20) problems.push_back("key_slots: " + std::move(what));
    };
    std::optional<KeySlotsHeader> header = read_header(txn, key_slots);
    if (!header) {
        problem("no readable header");
        return problems;
    }
    if (header->version != KA_KEY_SLOTS_V2) {
        problem("header of layout " + std::to_string(header->version) + " in a store of schema 3");
        return problems;
    }
    const KeySlotsHeader h = *header;
    // Chunks are read in place: the transaction keeps them valid.
    auto get_chunk = [&](uint64_t n) -> const unsigned char * {
        unsigned char key[4];
        chunk_key(n, key);
        MDB_val k = val(key, sizeof key), v;
        if (n >= h.chunks() || !lmdb::dbi_get(txn, key_slots, &k, &v) || v.mv_size != h.chunk_bytes()) return nullptr;
        return static_cast<const unsigned char *>(v.mv_data);
    };
    for (uint64_t n = 0; n < h.chunks(); n++) {
        if (get_chunk(n) == nullptr) {
            problem("chunk " + std::to_string(n) + " is missing or torn");
            return problems;
        }
    }
    uint64_t used = 0;
    const unsigned char *chunk = nullptr;
    for (uint64_t i = 0; i < h.slots; i++) {
        if (i % h.chunk_slots == 0) chunk = get_chunk(i / h.chunk_slots);
        const unsigned char *s = chunk + (i % h.chunk_slots) * KA_KEY_SLOT_SIZE;
        if (slot_state(s) == KA_SLOT_EMPTY) continue;
        used++;
        const std::string_view id = id_of_slot(s);
        const std::optional<StoredKey> key = key_by_id(txn, key_records, id);
        if (!key) {
            problem("slot " + std::to_string(i) + " has no key");
        } else if (std::memcmp(slot_of(*key, id).data(), s, KA_KEY_SLOT_SIZE) != 0) {
            problem("slot " + std::to_string(i) + " differs from its key's record");
        }
    }
    if (used != h.count) problem("header counts " + std::to_string(h.count) + " slots, " + std::to_string(used) + " are used");
    Cursor cur(txn, key_records);
    MDB_val k, v;
    for (bool ok = cur.get(k, v, MDB_FIRST); ok; ok = cur.get(k, v, MDB_NEXT)) {
        const unsigned char *slot = nullptr;
        const SlotFind found = k.mv_size == KA_ID_LEN && v.mv_size >= KA_HASH_LEN
                                   ? find_key_slot(h, static_cast<const unsigned char *>(v.mv_data), get_chunk, slot)
                                   : SlotFind::kAbsent;
        if (found == SlotFind::kAbsent || found == SlotFind::kNoChunk || slot == nullptr ||
            std::memcmp(slot_key_id(slot), k.mv_data, KA_ID_LEN) != 0) {
            problem("a key of key_records is not found through its slots");
        }
    }
    return problems;
}

}  // namespace keyauth
