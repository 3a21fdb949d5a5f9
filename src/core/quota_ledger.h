// The quota ledger: what each key and account with a quota has used in each
// of its periods, in a file every nginx worker maps shared (beside the usage
// store: "<keyauth_usage_db>/quota.ledger"). A file, not the keyauth_zone:
// the counts carry on across reloads, binary upgrades (the old and the new
// master's workers map the same pages) and restarts, and the kernel writes
// them back; the quota timer syncs it every usage interval (what a power
// loss can cost is docs/RELIABILITY.md's). keyauthd maps it read-only to
// show `used` and `remaining`.
//
// A slot (64 bytes) holds one subject's use in one period class: its kind
// (day, month, total) and, for days and months, the parity of the period's
// number. So a quota whose period changes kind and back finds the use it
// had (a unit is charged once, in one period, and never forgotten), and two
// processes whose clocks straddle a boundary (one a period ahead) charge two
// slots, never each other's period. The use is one 64-bit word, the period's
// tag (quota_period.h) in the top 16 bits and the units in the low 48, so a
// charge is one compare-and-swap and a new period starts at 0 without a
// reset step. A slot is given to another subject only once its period is
// over (a total's: once its key is revoked, released by sweep_part) or it
// holds nothing. Finding a new subject's slot takes the file's lock (flock)
// once; everything else is lock-free.
//
// The file grows: when a subject's window has no room, or the quota timer
// sees three quarters of the slots live, a table twice the size is appended
// (its blocks allocated first), and every process maps it when it next
// looks. Tables never move, so a subject's counts never do. Layout:
// lmdb_schema/SCHEMA.md, the quota ledger.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "quota_period.h"

namespace keyauth {

enum class QuotaSubject : uint8_t { kKey = 1, kAccount = 2 };

// A subject's slot as found: its use word, and the slot's sequence as seen
// (a slot reused for another subject since then is noticed by charge()).
struct QuotaRef {
    uint64_t *word = nullptr;
    uint32_t *seq = nullptr;
    uint32_t seen = 0;
};

class QuotaLedger {
public:
    static constexpr uint64_t kDefaultSlots = 1u << 18;  // 16 MiB, allocated at creation
    static constexpr uint64_t kMinSlots = 1;
    static constexpr uint64_t kMaxSlots = uint64_t{1} << 26;  // 4 GiB in all tables
    static constexpr uint32_t kMaxTables = 16;
    static constexpr uint32_t kProbeLimit = 64;
    static constexpr uint64_t kSlotBytes = 64;
    // A reported cost above this is malformed (the edge charges its static cost).
    static constexpr uint64_t kMaxCost = 1000000000;

    enum class Charge { kCharged, kNoRoom };

    // Opens PATH, making it (with `slots` slots, or kDefaultSlots for 0;
    // mode 0660; its disk blocks allocated so that a full disk never faults
    // a worker) if missing and writable; a writable open of a ledger with
    // fewer than `slots` grows it. nullptr with err filled on failure.
    static std::unique_ptr<QuotaLedger> open(const std::string &path, bool writable,
                                             std::string &err, uint64_t slots = 0);
    // keyauth-syncd's: an existing ledger (made by the nginx workers), for
    // writing what the other edges used. Never creates one.
    static std::unique_ptr<QuotaLedger> open_existing(const std::string &path, std::string &err);
    ~QuotaLedger();
    QuotaLedger(const QuotaLedger &) = delete;
    QuotaLedger &operator=(const QuotaLedger &) = delete;

    // Units used in the period `tag` (0 if the subject has none there).
    uint64_t used(QuotaSubject subject, const unsigned char *id, uint16_t tag) noexcept;

    // Finds the subject's slot for period `tag`, making one (under the file
    // lock, growing the file if its window has no room) if it has none;
    // false when there is no room and the file cannot grow, or the ledger
    // is read-only.
    bool find(QuotaSubject subject, const unsigned char *id, uint16_t tag, int64_t now_ms,
              QuotaRef &out) noexcept;

    // What the slot's subject has used in period `tag` (or a later period
    // of its class already charged: see charge()): on this edge, plus what
    // keyauth-syncd last heard the other edges used.
    static uint64_t used_in(const QuotaRef &ref, uint16_t tag) noexcept;
    // Adds cost to period `tag`: only if used + cost <= units (fit), or
    // unconditionally (saturating at 2^48 - 1). *used_after is the period's
    // use after it (or as found, when it did not fit).
    // A slot holds one period of a class at a time; one already holding a
    // later period of the class (two or more periods later: a metered call
    // settling that late, a clock that far behind) is charged in that
    // period, never set back: *charged_tag (optional) says which.
    Charge charge(QuotaSubject subject, const unsigned char *id, QuotaRef &ref, uint16_t tag,
                  uint64_t cost, uint64_t units, bool fit, int64_t now_ms,
                  uint64_t *used_after, uint16_t *charged_tag = nullptr) noexcept;
    // Takes back a charge of period `tag` (nothing if its slot moved on).
    static void refund(const QuotaRef &ref, uint16_t tag, uint64_t cost) noexcept;

    // Many edges (keyauth-syncd): each subject's own use in a period, to
    // publish, and what the other edges used, to count at this edge.
    struct Entry {
        QuotaSubject subject;
        unsigned char id[12];
        uint16_t tag;
        uint64_t used;  // this edge's own
    };
    // Every slot with a period (its use may be 0: a total released by the
    // sweep, published so that the other edges drop it too), in slot
    // order; lock-free, so a subject charged meanwhile may show either.
    template <class Fn>
    void for_each(Fn &&fn) {
        refresh();
        Entry e;
        const uint64_t n = slots();
        for (uint64_t i = 0; i < n; i++) {
            if (entry(i, e)) fn(e);
        }
    }
    bool entry(uint64_t slot, Entry &out) const noexcept;
    // Sets the other edges' use of period `tag` (false: no room, or the
    // ledger is read-only).
    bool set_others(QuotaSubject subject, const unsigned char *id, uint16_t tag, uint64_t used,
                    int64_t now_ms) noexcept;

    // The quota timer's, off the request path, a part at a time: walks
    // `count` slots from `from`, counts the live ones (a period not over,
    // with use) into *live, and releases the total slots of keys `dead`
    // says will never be used again (a revoked chain), so that another
    // subject can have them. Returns the slot after the last one walked
    // (slots() when the walk is over). dead(id) is called with no lock held.
    template <class Dead>
    uint64_t sweep_part(uint64_t from, uint64_t count, int64_t now_ms, uint64_t *live,
                        uint64_t *released, Dead &&dead) noexcept {
        const uint64_t n = slots();
        uint64_t i = from;
        for (; i < n && i - from < count; i++) {
            unsigned char id[12];
            switch (inspect(i, now_ms, id)) {
            case SlotState::kLive:
                ++*live;
                break;
            case SlotState::kLiveTotalKey:
                if (dead(static_cast<const unsigned char *>(id)) && release(i, id)) {
                    ++*released;
                } else {
                    ++*live;
                }
                break;
            case SlotState::kFree:
                break;
            }
        }
        return i;
    }
    // Appends tables until the ledger has at least `slots` slots (capped at
    // kMaxSlots). False, with err, when the file cannot grow.
    bool grow(uint64_t slots, std::string &err) noexcept;

    // msync: the quota timer's, off the request path.
    bool sync(std::string &err) noexcept;
    // Slots in every table mapped (refresh() maps the ones added since).
    uint64_t slots() const noexcept;
    void refresh() noexcept;
    // Slots ever given to a subject (a gauge kept in the file).
    uint64_t slots_in_use() const noexcept;
    // Kept in the file for every process to read: the live slots the last
    // whole sweep counted, and how often a subject found no room at all.
    uint64_t live_slots() const noexcept;
    void set_live_slots(uint64_t live) noexcept;
    uint64_t no_room() const noexcept;

private:
    QuotaLedger();
    static std::unique_ptr<QuotaLedger> open_file(const std::string &path, bool writable,
                                                  bool create, std::string &err, uint64_t slots);
    enum class SlotState { kFree, kLive, kLiveTotalKey };
    SlotState inspect(uint64_t slot, int64_t now_ms, unsigned char id[12]) const noexcept;
    bool release(uint64_t slot, const unsigned char *id) noexcept;
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The byte a slot names its subject and period class by (SCHEMA.md): 0x80,
// the subject, the tag's kind and, for days and months, its number's parity.
inline uint8_t quota_slot_class(QuotaSubject subject, uint16_t tag) noexcept {
    const unsigned kind = tag >> 14;
    const unsigned parity = kind == KA_QUOTA_TOTAL ? 0 : (tag & 1u);
    return static_cast<uint8_t>(0x80u | parity << 4 | kind << 2 | static_cast<unsigned>(subject));
}

}  // namespace keyauth
