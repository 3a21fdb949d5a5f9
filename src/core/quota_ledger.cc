// The quota ledger's slots (quota_ledger.h): finding a subject's slot of a
// period class, claiming one, charging and refunding it, and what keyauth-
// syncd and the sweep read and write of it. The file: quota_ledger_file.cc.
#include "quota_ledger_layout.h"

namespace keyauth {


QuotaLedger::Impl::Probe QuotaLedger::Impl::probe(QuotaSubject subject, uint8_t cls, const unsigned char *id, QuotaRef &out) const {
    const uint32_t n = mapped.load(std::memory_order_acquire);
    bool unsure = false;
    for (uint32_t t = 0; t < n; t++) {
        const uint64_t h = home(t, subject, id);
        const uint32_t w = window(t);
        for (uint32_t i = 0; i < w; i++) {
            unsigned char *s = window_slot(t, h, i);
            const uint32_t seq1 = __atomic_load_n(seq(s), __ATOMIC_ACQUIRE);
            if (seq1 == 0) return unsure ? Probe::kUnsure : Probe::kAbsent;
            if (seq1 & 1) {
                unsure = true;
                continue;
            }
            if (holds(s, cls, id)) {
                __atomic_thread_fence(__ATOMIC_ACQUIRE);
                if (__atomic_load_n(seq(s), __ATOMIC_RELAXED) != seq1) {
                    unsure = true;
                    continue;
                }
                out = QuotaRef{word(s), seq(s), seq1};
                return Probe::kFound;
            }
        }
    }
    return Probe::kUnsure;
}

bool QuotaLedger::Impl::claim(QuotaSubject subject, uint8_t cls, const unsigned char *id, int64_t now_ms,
           QuotaRef &out) {
    remap();
    const uint32_t n = mapped.load(std::memory_order_acquire);
    for (uint32_t t = 0; t < n; t++) {
        const uint64_t h = home(t, subject, id);
        bool ended = false;
        for (uint32_t i = 0; i < window(t); i++) {
            unsigned char *s = window_slot(t, h, i);
            const uint32_t q = __atomic_load_n(seq(s), __ATOMIC_ACQUIRE);
            if (q == 0) {
                ended = true;
                break;
            }
            if (!(q & 1) && holds(s, cls, id)) {
                out = QuotaRef{word(s), seq(s), q};
                return true;
            }
        }
        if (ended) break;
    }
    for (uint32_t t = 0; t < n; t++) {
        if (take(t, subject, cls, id, now_ms, out)) return true;
    }
    std::string err;
    const uint64_t have = capacity.load(std::memory_order_relaxed);
    const uint64_t more = have < kMaxSlots - have ? have : kMaxSlots - have;
    if (more > 0 && append_table(more, err)) {
        return take(mapped.load(std::memory_order_acquire) - 1, subject, cls, id, now_ms, out);
    }
    return false;
}

bool QuotaLedger::Impl::take(uint32_t t, QuotaSubject subject, uint8_t cls, const unsigned char *id, int64_t now_ms,
          QuotaRef &out) {
    const uint64_t h = home(t, subject, id);
    for (uint32_t i = 0; i < window(t); i++) {
        unsigned char *s = window_slot(t, h, i);
        uint32_t *sq = seq(s);
        const uint32_t q = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
        if (q != 0 && !(q & 1)) {
            // A live subject's slot, unless both its words are stale
            // and no charge lands first (a charge swaps the word it
            // expects, so it finds MOVING and looks again).
            uint64_t w = __atomic_load_n(word(s), __ATOMIC_ACQUIRE);
            if (!stale(w, now_ms) || !stale(__atomic_load_n(others(s), __ATOMIC_ACQUIRE), now_ms) ||
                !__atomic_compare_exchange_n(word(s), &w, word_of(kMovingTag, 0), false,
                                             __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                continue;
            }
        } else if (q == 0) {
            __atomic_fetch_add(header_u64(kInUseAt), 1, __ATOMIC_RELAXED);
        }
        // odd: its writer died holding the lock's place; it is ours now
        const uint32_t writing = (q & 1) ? q : q + 1;
        __atomic_store_n(sq, writing, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(s + kSubjectAt, cls, __ATOMIC_RELAXED);
        std::memcpy(s + kIdAt, id, KA_ID_LEN);
        __atomic_store_n(others(s), uint64_t{0}, __ATOMIC_RELAXED);
        __atomic_store_n(word(s), uint64_t{0}, __ATOMIC_RELAXED);
        __atomic_store_n(sq, writing + 1, __ATOMIC_RELEASE);
        out = QuotaRef{word(s), sq, writing + 1};
        return true;
    }
    return false;
}

uint64_t QuotaLedger::used(QuotaSubject subject, const unsigned char *id, uint16_t tag) noexcept {
    impl_->remap();
    QuotaRef ref;
    const uint8_t cls = quota_slot_class(subject, tag);
    for (int attempt = 0; attempt < 3; attempt++) {
        Impl::Probe p = impl_->probe(subject, cls, id, ref);
        if (p == Impl::Probe::kFound) return used_in(ref, tag);
        if (p == Impl::Probe::kAbsent) return 0;
    }
    return 0;
}

bool QuotaLedger::find(QuotaSubject subject, const unsigned char *id, uint16_t tag, int64_t now_ms,
                       QuotaRef &out) noexcept {
    impl_->remap();
    const uint8_t cls = quota_slot_class(subject, tag);
    if (impl_->probe(subject, cls, id, out) == Impl::Probe::kFound) return true;
    if (!impl_->writable || flock(impl_->fd, LOCK_EX) != 0) return false;
    bool ok = false;
    try {
        ok = impl_->claim(subject, cls, id, now_ms, out);
    } catch (...) {  // an error text that could not be made: no room
    }
    if (!ok) __atomic_fetch_add(impl_->header_u64(kNoRoomAt), 1, __ATOMIC_RELAXED);
    flock(impl_->fd, LOCK_UN);
    return ok;
}

namespace {

// The other edges' use of period `tag`, beside a slot's own word.
uint64_t others_in(const uint64_t *word, uint16_t tag) {
    return counted(__atomic_load_n(word + (kOthersAt - kWordAt) / sizeof(uint64_t), __ATOMIC_ACQUIRE),
                   tag);
}

}  // namespace

uint64_t QuotaLedger::used_in(const QuotaRef &ref, uint16_t tag) noexcept {
    const uint64_t own = counted(__atomic_load_n(ref.word, __ATOMIC_ACQUIRE), tag);
    const uint64_t sum = own + others_in(ref.word, tag);
    return sum > kUsedMask ? kUsedMask : sum;
}

namespace {

// Takes cost back from a word holding period `tag` (nothing if it holds
// another period: the charge is no longer counted there).
void take_back(uint64_t *word, uint16_t tag, uint64_t cost) {
    uint64_t w = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    while (tag_of(w) == tag) {
        const uint64_t used = w & kUsedMask;
        const uint64_t after = used > cost ? used - cost : 0;
        if (__atomic_compare_exchange_n(word, &w, word_of(tag, after), false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            return;
        }
    }
}

}  // namespace

QuotaLedger::Charge QuotaLedger::charge(QuotaSubject subject, const unsigned char *id,
                                        QuotaRef &ref, uint16_t tag, uint64_t cost,
                                        uint64_t units, bool fit, int64_t now_ms,
                                        uint64_t *used_after, uint16_t *charged_tag) noexcept {
    for (int moved = 0; moved < 4; moved++) {
        uint64_t w = __atomic_load_n(ref.word, __ATOMIC_ACQUIRE);
        while (__atomic_load_n(ref.seq, __ATOMIC_ACQUIRE) == ref.seen && tag_of(w) != kMovingTag) {
            // A slot of an earlier build (binary upgrade) that its workers
            // charged in another class meanwhile is no longer this one's.
            if (w != 0 && tag_of(w) != tag &&
                quota_slot_class(subject, tag_of(w)) != quota_slot_class(subject, tag)) {
                break;
            }
            // A word already in a later period of the class is charged in
            // that period, never set back to ours.
            const uint16_t t = later(tag_of(w), tag) ? tag_of(w) : tag;
            const uint64_t used = tag_of(w) == t ? w & kUsedMask : 0;
            const uint64_t fleet = used + others_in(ref.word, t);
            if (fit && (cost > units || fleet > units - cost)) {
                *used_after = fleet;
                return Charge::kNoRoom;
            }
            const uint64_t after = used + cost > kUsedMask ? kUsedMask : used + cost;
            if (!__atomic_compare_exchange_n(ref.word, &w, word_of(t, after), false,
                                             __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                continue;
            }
            if (__atomic_load_n(ref.seq, __ATOMIC_ACQUIRE) == ref.seen) {
                *used_after = fleet + cost;
                if (charged_tag) *charged_tag = t;
                return Charge::kCharged;
            }
            // The slot went to another subject between the look at its
            // sequence and the swap: the units are not ours to leave there.
            take_back(ref.word, t, cost);
            break;
        }
        // The slot went to another subject (its period looked over): find
        // this subject's again.
        if (!find(subject, id, tag, now_ms, ref)) break;
    }
    *used_after = 0;
    return Charge::kNoRoom;
}

void QuotaLedger::refund(const QuotaRef &ref, uint16_t tag, uint64_t cost) noexcept {
    // A slot charged in this period is not stale, so it has not moved.
    if (__atomic_load_n(ref.seq, __ATOMIC_ACQUIRE) == ref.seen) take_back(ref.word, tag, cost);
}

bool QuotaLedger::entry(uint64_t i, Entry &out) const noexcept {
    unsigned char *s = impl_->slot(i);
    if (s == nullptr) return false;
    const uint32_t seq1 = __atomic_load_n(Impl::seq(s), __ATOMIC_ACQUIRE);
    if (seq1 == 0 || (seq1 & 1)) return false;
    const uint64_t w = __atomic_load_n(Impl::word(s), __ATOMIC_ACQUIRE);
    const uint8_t cls = __atomic_load_n(s + kSubjectAt, __ATOMIC_RELAXED);
    out.subject = static_cast<QuotaSubject>(cls & 3);
    std::memcpy(out.id, s + kIdAt, KA_ID_LEN);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(Impl::seq(s), __ATOMIC_RELAXED) != seq1) return false;
    out.tag = tag_of(w);
    out.used = w & kUsedMask;
    return w != 0 && out.tag != kMovingTag &&
           (out.subject == QuotaSubject::kKey || out.subject == QuotaSubject::kAccount) &&
           (!(cls & kClassBit) || quota_slot_class(out.subject, out.tag) == cls);
}

bool QuotaLedger::set_others(QuotaSubject subject, const unsigned char *id, uint16_t tag,
                             uint64_t used, int64_t now_ms) noexcept {
    // Under the file lock (keyauth-syncd's, off the request path): the slot
    // cannot go to another subject between finding it and the store.
    if (!impl_->writable || flock(impl_->fd, LOCK_EX) != 0) return false;
    QuotaRef ref;
    bool ok = false;
    try {
        ok = impl_->claim(subject, quota_slot_class(subject, tag), id, now_ms, ref);
    } catch (...) {
    }
    if (ok) {
        uint64_t *o = ref.word + (kOthersAt - kWordAt) / sizeof(uint64_t);
        __atomic_store_n(o, word_of(tag, used > kUsedMask ? kUsedMask : used), __ATOMIC_RELEASE);
    }
    flock(impl_->fd, LOCK_UN);
    return ok;
}

QuotaLedger::SlotState QuotaLedger::inspect(uint64_t i, int64_t now_ms, unsigned char id[12]) const
    noexcept {
    unsigned char *s = impl_->slot(i);
    if (s == nullptr) return SlotState::kFree;
    const uint32_t seq1 = __atomic_load_n(Impl::seq(s), __ATOMIC_ACQUIRE);
    if (seq1 == 0 || (seq1 & 1)) return SlotState::kFree;
    const uint64_t w = __atomic_load_n(Impl::word(s), __ATOMIC_ACQUIRE);
    const uint64_t o = __atomic_load_n(Impl::others(s), __ATOMIC_ACQUIRE);
    if (stale(w, now_ms) && stale(o, now_ms)) return SlotState::kFree;
    const uint8_t cls = __atomic_load_n(s + kSubjectAt, __ATOMIC_RELAXED);
    std::memcpy(id, s + kIdAt, KA_ID_LEN);
    const uint16_t tag = tag_of(w != 0 ? w : o);
    const bool total_key = (cls & 3) == static_cast<uint8_t>(QuotaSubject::kKey) &&
                           kind_of(tag) == KA_QUOTA_TOTAL && tag != kMovingTag;
    return total_key ? SlotState::kLiveTotalKey : SlotState::kLive;
}

bool QuotaLedger::release(uint64_t i, const unsigned char *id) noexcept {
    // Under the file lock, like a claim: the slot keeps its subject and
    // its total tag with no units, so that keyauth-syncd publishes the 0
    // and the other edges drop their share of it too; a charge racing the
    // release (a metered call of a key revoked meanwhile) finds its word
    // changed and charges what is left.
    if (!impl_->writable || flock(impl_->fd, LOCK_EX) != 0) return false;
    unsigned char *s = impl_->slot(i);
    bool done = false;
    const uint32_t seq1 = __atomic_load_n(Impl::seq(s), __ATOMIC_ACQUIRE);
    if (!(seq1 & 1) && std::memcmp(s + kIdAt, id, KA_ID_LEN) == 0) {
        uint64_t w = __atomic_load_n(Impl::word(s), __ATOMIC_ACQUIRE);
        const uint64_t o = __atomic_load_n(Impl::others(s), __ATOMIC_ACQUIRE);
        const uint16_t tag = tag_of(w != 0 ? w : o);
        if (kind_of(tag) == KA_QUOTA_TOTAL && tag != kMovingTag &&
            __atomic_compare_exchange_n(Impl::word(s), &w, word_of(tag, 0), false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(Impl::others(s), word_of(tag, 0), __ATOMIC_RELEASE);
            done = true;
        }
    }
    flock(impl_->fd, LOCK_UN);
    return done;
}

}  // namespace keyauth
