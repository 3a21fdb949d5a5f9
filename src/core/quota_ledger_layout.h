// Inside the quota ledger (quota_ledger.h): the file's layout
// (lmdb_schema/SCHEMA.md, the quota ledger) and the state one process keeps
// of it. quota_ledger_file.cc opens, maps and grows the file;
// quota_ledger.cc finds slots and charges them. Internal to those two.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "le.h"
#include "quota_ledger.h"

namespace keyauth {
namespace quota_ledger_detail {

// The file: a page of header, then the tables of slots, one after another.
inline constexpr char kMagic[8] = {'K', 'A', 'Q', 'U', 'O', 'T', 'A', '1'};
// Layout 1 still: a reader of the first table alone (an older build, during
// a binary upgrade) reads this file right, and ignores the tables after it.
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kSlotBytes = QuotaLedger::kSlotBytes;

// Header: magic, u32 version, u32 slot size, u64 slots of the first table,
// u64 slots ever used; then u32 tables (0 read as 1), u32 reserved, u64
// slots of each table (the first's repeated), u64 live slots (the last
// whole sweep's), u64 subjects that found no room.
inline constexpr size_t kSlotsAt = 16;
inline constexpr size_t kInUseAt = 24;
inline constexpr size_t kTablesAt = 32;
inline constexpr size_t kTableSlotsAt = 40;
inline constexpr size_t kLiveAt = kTableSlotsAt + 8 * QuotaLedger::kMaxTables;
inline constexpr size_t kNoRoomAt = kLiveAt + 8;

// Slot: u32 sequence (odd while its subject is written), u8 class
// (quota_slot_class), 3 reserved, 12 bytes of id, 4 reserved, u64 use word
// (this edge's), u64 others word (the other edges', in the same layout:
// keyauth-syncd's), 24 reserved.
inline constexpr size_t kSeqAt = 0;
inline constexpr size_t kSubjectAt = 4;
inline constexpr size_t kIdAt = 8;
inline constexpr size_t kWordAt = 24;
inline constexpr size_t kOthersAt = 32;

inline constexpr uint64_t kUsedMask = (uint64_t{1} << 48) - 1;
// Never a period's tag (TOTAL is 0xC000 alone): a slot being given to
// another subject.
inline constexpr uint16_t kMovingTag = 0xffff;
// A class byte with this bit names its period class; without it (a slot an
// earlier build made: 1 key, 2 account) the class is its word's.
inline constexpr uint8_t kClassBit = 0x80;

inline uint16_t tag_of(uint64_t w) { return static_cast<uint16_t>(w >> 48); }
inline uint64_t word_of(uint16_t tag, uint64_t used) { return uint64_t{tag} << 48 | (used & kUsedMask); }

inline uint8_t kind_of(uint16_t tag) { return static_cast<uint8_t>(tag >> 14); }

// True if period tag a comes after b, both of one kind (day or month
// numbers, modulo 2^14: the nearer way round).
inline bool later(uint16_t a, uint16_t b) {
    if (kind_of(a) != kind_of(b) || a == b) return false;
    return ((a - b) & 0x3fff) < 0x2000;
}

// What a word counts for period `tag`: its units if it holds that period,
// or a later one of its class (charge() charges there, never back).
inline uint64_t counted(uint64_t w, uint16_t tag) {
    const uint16_t t = tag_of(w);
    return t == tag || later(t, tag) ? w & kUsedMask : 0;
}

// A word whose slot may serve another subject: it holds nothing (never
// charged, all refunded, a total released by the sweep), a period that is
// over by this clock (not one that is later than this clock's now: another
// process's clock runs ahead), or is being moved by a claimer that died
// holding the file lock's place (claims are made under the lock).
inline bool stale(uint64_t w, int64_t now_ms) {
    const uint16_t tag = tag_of(w);
    if ((w & kUsedMask) == 0 || tag == kMovingTag) return true;
    const uint8_t period = kind_of(tag);
    if (period != KA_QUOTA_DAY && period != KA_QUOTA_MONTH) return false;
    return later(quota_period_tag(period, now_ms), tag);
}

inline std::string errno_text(const char *what, const std::string &path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

}  // namespace quota_ledger_detail

using namespace quota_ledger_detail;

struct QuotaLedger::Impl {
    struct Table {
        unsigned char *slots = nullptr;
        uint64_t n = 0;
        size_t map_len = 0;
        bool own_map = false;  // the first table lives in the header's map
    };

    std::string path;
    int fd = -1;
    bool writable = false;
    unsigned char *map = nullptr;  // the header and the first table
    size_t map_len = 0;
    Table tables[kMaxTables];
    std::atomic<uint32_t> mapped{0};
    std::atomic<uint64_t> capacity{0};
    std::mutex remap_mu;  // keyauthd reads from several threads

    unsigned char *slot(uint64_t i) const {
        const uint32_t n = mapped.load(std::memory_order_acquire);
        for (uint32_t t = 0; t < n; t++) {
            if (i < tables[t].n) return tables[t].slots + i * kSlotBytes;
            i -= tables[t].n;
        }
        return nullptr;
    }
    static uint32_t *seq(unsigned char *s) { return reinterpret_cast<uint32_t *>(s + kSeqAt); }
    static uint64_t *word(unsigned char *s) { return reinterpret_cast<uint64_t *>(s + kWordAt); }
    static uint64_t *others(unsigned char *s) { return reinterpret_cast<uint64_t *>(s + kOthersAt); }
    // Where table t starts in the file: each at a page boundary after the
    // one before, so that it maps on its own.
    uint64_t table_offset(uint32_t t) const {
        uint64_t offset = kHeaderBytes + tables[0].n * kSlotBytes;
        for (uint32_t j = 1; j <= t; j++) {
            offset = (offset + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
            if (j < t) offset += tables[j].n * kSlotBytes;
        }
        return t == 0 ? kHeaderBytes : offset;
    }
    uint64_t *header_u64(size_t at) const { return reinterpret_cast<uint64_t *>(map + at); }
    uint32_t *header_tables() const { return reinterpret_cast<uint32_t *>(map + kTablesAt); }

    uint32_t tables_in_file() const {
        const uint32_t n = __atomic_load_n(header_tables(), __ATOMIC_ACQUIRE);
        return n == 0 ? 1 : n > kMaxTables ? kMaxTables : n;
    }
    uint64_t table_slots_in_file(uint32_t t) const {
        return t == 0 ? __atomic_load_n(header_u64(kSlotsAt), __ATOMIC_ACQUIRE)
                      : __atomic_load_n(header_u64(kTableSlotsAt + 8 * t), __ATOMIC_ACQUIRE);
    }

    // Maps the tables another process appended since; false if one cannot
    // be mapped (then it is tried again next time). One load and compare
    // while nothing was appended (every charge asks).
    bool remap() noexcept {
        return tables_in_file() <= mapped.load(std::memory_order_acquire) || remap_slow();
    }
    bool remap_slow() noexcept;
    bool map_new_tables() noexcept;

    // Under the file lock: appends one table of `n` slots, its blocks
    // allocated before any process is told of it.
    bool append_table(uint64_t n, std::string &err);

    // The first slot of the subject's window in table t.
    uint64_t home(uint32_t t, QuotaSubject subject, const unsigned char *id) const {
        // The ids' last six bytes are random.
        uint64_t h = 0;
        for (int i = 4; i < KA_ID_LEN; i++) h = h << 8 | id[i];
        h = (h ^ static_cast<uint64_t>(subject)) * 0x9e3779b97f4a7c15ull;
        return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * tables[t].n) >> 64);
    }
    unsigned char *window_slot(uint32_t t, uint64_t home_slot, uint32_t i) const {
        return tables[t].slots + ((home_slot + i) % tables[t].n) * kSlotBytes;
    }
    uint32_t window(uint32_t t) const {
        return kProbeLimit < tables[t].n ? kProbeLimit : static_cast<uint32_t>(tables[t].n);
    }

    // Whether slot s holds the subject's use of class `cls`: named so, or a
    // slot of an earlier build (its class byte the subject alone) whose
    // word (or, never charged here, others word) is of that class.
    static bool holds(unsigned char *s, uint8_t cls, const unsigned char *id) {
        const uint8_t b = __atomic_load_n(s + kSubjectAt, __ATOMIC_RELAXED);
        if ((b != cls && b != (cls & 3)) || std::memcmp(s + kIdAt, id, KA_ID_LEN) != 0) return false;
        if (b == cls) return true;
        uint64_t w = __atomic_load_n(word(s), __ATOMIC_ACQUIRE);
        if (w == 0) w = __atomic_load_n(others(s), __ATOMIC_ACQUIRE);
        return w != 0 && tag_of(w) != kMovingTag &&
               quota_slot_class(static_cast<QuotaSubject>(b), tag_of(w)) == cls;
    }

    enum class Probe { kFound, kAbsent, kUnsure };

    // Lock-free: the subject's slot; kAbsent at the first never-used slot
    // of a window (the subject is in no table after it either: a window
    // with such a slot had room when the subject was placed), kUnsure when
    // a slot was being rewritten or every window ended.
    Probe probe(QuotaSubject subject, uint8_t cls, const unsigned char *id, QuotaRef &out) const;

    // Under the file lock, so no other process writes a slot's subject:
    // finds the subject in its windows (up to the first slot never used),
    // else gives it the first slot of a window that is never used, left odd
    // by a writer that died, or stale; else appends a table and takes its
    // slot there.
    bool claim(QuotaSubject subject, uint8_t cls, const unsigned char *id, int64_t now_ms,
               QuotaRef &out);

    // claim()'s: the first free slot of the subject's window in table t.
    bool take(uint32_t t, QuotaSubject subject, uint8_t cls, const unsigned char *id, int64_t now_ms,
              QuotaRef &out);
};

}  // namespace keyauth
