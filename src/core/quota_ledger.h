// The quota ledger: what each key and account with a quota has used in its
// current period, in a file every nginx worker maps shared (beside the usage
// store: "<keyauth_usage_db>/quota.ledger"). A file, not the keyauth_zone:
// the counts carry on across reloads, binary upgrades (the old and the new
// master's workers map the same pages) and restarts, and the kernel writes
// them back; the collector syncs it every usage interval (what a power loss
// can cost is docs/RELIABILITY.md's). keyauthd maps it read-only to show
// `used` and `remaining`.
//
// Each subject (a key or an account) has a 64-byte slot; its use is one
// 64-bit word, the period's tag (quota_period.h) in the top 16 bits and the
// units used in the low 48, so a charge is one compare-and-swap and a new
// period starts at 0 without any reset step. A slot is never reused while
// its period has not ended (a total quota's never), so no zone size or
// eviction refills a quota. Finding a new subject's slot takes the file's
// lock (flock) once; everything else is lock-free.
#pragma once

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
    static constexpr uint32_t kProbeLimit = 64;
    // A reported cost above this is malformed (the edge charges its static cost).
    static constexpr uint64_t kMaxCost = 1000000000;

    enum class Charge { kCharged, kNoRoom };

    // Opens PATH, making it (with `slots` slots, mode 0640, its disk blocks
    // allocated so that a full disk never faults a worker) if missing and
    // writable. nullptr with err filled on failure.
    static std::unique_ptr<QuotaLedger> open(const std::string &path, bool writable,
                                             std::string &err, uint64_t slots = kDefaultSlots);
    // keyauth-syncd's: an existing ledger (made by the nginx workers), for
    // writing what the other edges used. Never creates one.
    static std::unique_ptr<QuotaLedger> open_existing(const std::string &path, std::string &err);
    ~QuotaLedger();
    QuotaLedger(const QuotaLedger &) = delete;
    QuotaLedger &operator=(const QuotaLedger &) = delete;

    // Units used in the period `tag` (0 if the subject has no slot, or its
    // slot holds another period).
    uint64_t used(QuotaSubject subject, const unsigned char *id, uint16_t tag) const noexcept;

    // Finds the subject's slot, making one (under the file lock) if it has
    // none; false when the ledger has no room for it, or is read-only.
    bool find(QuotaSubject subject, const unsigned char *id, int64_t now_ms,
              QuotaRef &out) noexcept;

    // What the slot's subject has used in period `tag` (or a later period
    // of its kind already charged by a process whose clock is ahead): on
    // this edge, plus what keyauth-syncd last heard the other edges used.
    static uint64_t used_in(const QuotaRef &ref, uint16_t tag) noexcept;
    // Adds cost to period `tag`: only if used + cost <= units (fit), or
    // unconditionally (saturating at 2^48 - 1). *used_after is the period's
    // use after it (or as found, when it did not fit).
    // A word already holding a later period of the same kind (a worker whose
    // clock lags, a metered call settling after its period) is charged in
    // that period, never set back: *charged_tag (optional) says which.
    Charge charge(QuotaSubject subject, const unsigned char *id, QuotaRef &ref, uint16_t tag,
                  uint64_t cost, uint64_t units, bool fit, int64_t now_ms,
                  uint64_t *used_after, uint16_t *charged_tag = nullptr) noexcept;
    // Takes back a charge of period `tag` (nothing if its period ended).
    static void refund(const QuotaRef &ref, uint16_t tag, uint64_t cost) noexcept;

    // Many edges (keyauth-syncd): each subject's own use in its period, to
    // publish, and what the other edges used, to count at this edge.
    struct Entry {
        QuotaSubject subject;
        unsigned char id[12];
        uint16_t tag;
        uint64_t used;  // this edge's own
    };
    // Every subject with use in a period (a total quota's included), in
    // slot order; lock-free, so a subject charged meanwhile may show either.
    template <class Fn>
    void for_each(Fn &&fn) const {
        Entry e;
        for (uint64_t i = 0; i < slots(); i++) {
            if (entry(i, e)) fn(e);
        }
    }
    bool entry(uint64_t slot, Entry &out) const noexcept;
    // Sets the other edges' use of period `tag` (false: no room, or the
    // ledger is read-only).
    bool set_others(QuotaSubject subject, const unsigned char *id, uint16_t tag, uint64_t used,
                    int64_t now_ms) noexcept;

    // msync: the collector's, off the request path.
    bool sync(std::string &err) noexcept;
    uint64_t slots() const noexcept;
    uint64_t slots_in_use() const noexcept;

private:
    QuotaLedger();
    static std::unique_ptr<QuotaLedger> open_file(const std::string &path, bool writable,
                                                  bool create, std::string &err, uint64_t slots);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace keyauth
