#include "quota_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "le.h"

namespace keyauth {
namespace {

// The file: a page of header, then the slots.
constexpr char kMagic[8] = {'K', 'A', 'Q', 'U', 'O', 'T', 'A', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kSlotBytes = 64;
constexpr uint64_t kMaxSlots = uint64_t{1} << 26;

// Header: magic, u32 version, u32 slot size, u64 slots, u64 slots in use.
constexpr size_t kSlotsAt = 16;
constexpr size_t kInUseAt = 24;

// Slot: u32 sequence (odd while its subject is written), u8 subject,
// 3 reserved, 12 bytes of id, 4 reserved, u64 use word (this edge's), u64
// others word (the other edges', in the same layout: keyauth-syncd's), 24
// reserved.
constexpr size_t kSeqAt = 0;
constexpr size_t kSubjectAt = 4;
constexpr size_t kIdAt = 8;
constexpr size_t kWordAt = 24;
constexpr size_t kOthersAt = 32;

constexpr uint64_t kUsedMask = (uint64_t{1} << 48) - 1;
// Never a period's tag (TOTAL is 0xC000 alone): a slot being given to
// another subject.
constexpr uint16_t kMovingTag = 0xffff;

uint16_t tag_of(uint64_t w) { return static_cast<uint16_t>(w >> 48); }
uint64_t word_of(uint16_t tag, uint64_t used) { return uint64_t{tag} << 48 | (used & kUsedMask); }

uint8_t kind_of(uint16_t tag) { return static_cast<uint8_t>(tag >> 14); }

// True if period tag a comes after b, both of one kind (day or month
// numbers, modulo 2^14: the nearer way round).
bool later(uint16_t a, uint16_t b) {
    if (kind_of(a) != kind_of(b) || a == b) return false;
    return ((a - b) & 0x3fff) < 0x2000;
}

// What a word counts for period `tag`: its units if it holds that period,
// or a later one of the same kind (a worker whose clock lags must not see
// the new period's use as nothing); 0 if it holds an earlier period or
// another kind (a quota whose period changed kind counts afresh).
uint64_t counted(uint64_t w, uint16_t tag) {
    const uint16_t t = tag_of(w);
    return t == tag || later(t, tag) ? w & kUsedMask : 0;
}

// A word whose period is over (or was never charged): its slot may serve
// another subject. A total quota's never is, nor one whose period is later
// than this clock's now (another process's clock runs ahead).
bool stale(uint64_t w, int64_t now_ms) {
    const uint16_t tag = tag_of(w);
    if (w == 0) return true;
    const uint8_t period = kind_of(tag);
    if (period != KA_QUOTA_DAY && period != KA_QUOTA_MONTH) return false;
    return later(quota_period_tag(period, now_ms), tag);
}

std::string errno_text(const char *what, const std::string &path) {
    return std::string(what) + " " + path + ": " + std::strerror(errno);
}

}  // namespace

struct QuotaLedger::Impl {
    std::string path;
    int fd = -1;
    bool writable = false;
    unsigned char *map = nullptr;
    size_t map_len = 0;
    uint64_t slots = 0;

    unsigned char *slot(uint64_t i) const { return map + kHeaderBytes + i * kSlotBytes; }
    static uint32_t *seq(unsigned char *s) { return reinterpret_cast<uint32_t *>(s + kSeqAt); }
    static uint64_t *word(unsigned char *s) { return reinterpret_cast<uint64_t *>(s + kWordAt); }
    static uint64_t *others(unsigned char *s) { return reinterpret_cast<uint64_t *>(s + kOthersAt); }
    uint64_t *in_use() const { return reinterpret_cast<uint64_t *>(map + kInUseAt); }

    uint64_t home(QuotaSubject subject, const unsigned char *id) const {
        // The ids' last six bytes are random.
        uint64_t h = 0;
        for (int i = 4; i < KA_ID_LEN; i++) h = h << 8 | id[i];
        h = (h ^ static_cast<uint64_t>(subject)) * 0x9e3779b97f4a7c15ull;
        return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * slots) >> 64);
    }

    static bool holds(unsigned char *s, QuotaSubject subject, const unsigned char *id) {
        return __atomic_load_n(s + kSubjectAt, __ATOMIC_RELAXED) == static_cast<uint8_t>(subject) &&
               std::memcmp(s + kIdAt, id, KA_ID_LEN) == 0;
    }

    enum class Probe { kFound, kAbsent, kUnsure };

    // Lock-free: the subject's slot, kAbsent at the first never-used slot,
    // kUnsure when a slot was being rewritten or the window ended.
    Probe probe(QuotaSubject subject, const unsigned char *id, QuotaRef &out) const {
        const uint64_t h = home(subject, id);
        for (uint32_t i = 0; i < kProbeLimit && i < slots; i++) {
            unsigned char *s = slot((h + i) % slots);
            const uint32_t seq1 = __atomic_load_n(seq(s), __ATOMIC_ACQUIRE);
            if (seq1 == 0) return Probe::kAbsent;
            if (seq1 & 1) return Probe::kUnsure;
            if (holds(s, subject, id)) {
                __atomic_thread_fence(__ATOMIC_ACQUIRE);
                if (__atomic_load_n(seq(s), __ATOMIC_RELAXED) != seq1) return Probe::kUnsure;
                out = QuotaRef{word(s), seq(s), seq1};
                return Probe::kFound;
            }
        }
        return Probe::kUnsure;
    }

    // Under the file lock, so no other process writes a slot's subject:
    // finds the subject anywhere in its window (up to the first slot never
    // used), else gives it the first slot that is never used, left odd by a
    // writer that died, or whose periods are all over.
    bool claim(QuotaSubject subject, const unsigned char *id, int64_t now_ms, QuotaRef &out) {
        const uint64_t h = home(subject, id);
        const uint32_t window = kProbeLimit < slots ? kProbeLimit : static_cast<uint32_t>(slots);
        for (uint32_t i = 0; i < window; i++) {
            unsigned char *s = slot((h + i) % slots);
            const uint32_t n = __atomic_load_n(seq(s), __ATOMIC_ACQUIRE);
            if (n == 0) break;
            if (!(n & 1) && holds(s, subject, id)) {
                out = QuotaRef{word(s), seq(s), n};
                return true;
            }
        }
        for (uint32_t i = 0; i < window; i++) {
            unsigned char *s = slot((h + i) % slots);
            uint32_t *sq = seq(s);
            const uint32_t n = __atomic_load_n(sq, __ATOMIC_ACQUIRE);
            if (n != 0 && !(n & 1)) {
                // A live subject's slot, unless both its words hold periods
                // that are over and no charge lands first (a charge swaps the
                // word it expects, so it finds MOVING and looks again).
                uint64_t w = __atomic_load_n(word(s), __ATOMIC_ACQUIRE);
                if (!stale(w, now_ms) || !stale(__atomic_load_n(others(s), __ATOMIC_ACQUIRE), now_ms) ||
                    !__atomic_compare_exchange_n(word(s), &w, word_of(kMovingTag, 0), false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                    continue;
                }
            } else if (n == 0) {
                __atomic_fetch_add(in_use(), 1, __ATOMIC_RELAXED);
            }
            // odd: its writer died holding the lock's place; it is ours now
            const uint32_t writing = (n & 1) ? n : n + 1;
            __atomic_store_n(sq, writing, __ATOMIC_RELEASE);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            __atomic_store_n(s + kSubjectAt, static_cast<uint8_t>(subject), __ATOMIC_RELAXED);
            std::memcpy(s + kIdAt, id, KA_ID_LEN);
            __atomic_store_n(others(s), uint64_t{0}, __ATOMIC_RELAXED);
            __atomic_store_n(word(s), uint64_t{0}, __ATOMIC_RELAXED);
            __atomic_store_n(sq, writing + 1, __ATOMIC_RELEASE);
            out = QuotaRef{word(s), sq, writing + 1};
            return true;
        }
        return false;
    }
};

QuotaLedger::QuotaLedger() : impl_(new Impl()) {}

QuotaLedger::~QuotaLedger() {
    if (impl_->map) munmap(impl_->map, impl_->map_len);
    if (impl_->fd >= 0) close(impl_->fd);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open(const std::string &path, bool writable,
                                               std::string &err, uint64_t slots) {
    return open_file(path, writable, writable, err, slots);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open_existing(const std::string &path, std::string &err) {
    return open_file(path, true, false, err, kDefaultSlots);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open_file(const std::string &path, bool writable,
                                                    bool create, std::string &err,
                                                    uint64_t slots) {
    std::unique_ptr<QuotaLedger> l(new QuotaLedger());
    Impl &m = *l->impl_;
    m.path = path;
    m.writable = writable;
    // 0660: keyauth-syncd (the group) writes the other edges' use
    m.fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | (create ? O_CREAT : 0) | O_CLOEXEC,
                  0660);
    if (m.fd >= 0 && create) (void)::fchmod(m.fd, 0660);  // the umask may have taken the group's bits
    if (m.fd < 0) {
        err = errno_text("cannot open the quota ledger", path);
        return nullptr;
    }
    struct Unlock {
        int fd;
        bool held;
        ~Unlock() {
            if (held) flock(fd, LOCK_UN);
        }
    } lock{m.fd, writable && flock(m.fd, LOCK_EX) == 0};
    if (writable && !lock.held) {
        err = errno_text("cannot lock the quota ledger", path);
        return nullptr;
    }
    struct stat st;
    if (fstat(m.fd, &st) != 0) {
        err = errno_text("cannot stat the quota ledger", path);
        return nullptr;
    }
    unsigned char header[kHeaderBytes] = {};
    if (st.st_size == 0 && create) {
        if (slots == 0 || slots > kMaxSlots) {
            err = "quota ledger slots out of range";
            return nullptr;
        }
        const off_t size = static_cast<off_t>(kHeaderBytes + slots * kSlotBytes);
        const int rc = posix_fallocate(m.fd, 0, size);
        if (rc != 0) {
            errno = rc;
            err = errno_text("cannot allocate the quota ledger", path);
            if (ftruncate(m.fd, 0) != 0) err += " (and cannot empty it again)";
            return nullptr;
        }
        std::memcpy(header, kMagic, sizeof kMagic);
        store_le<uint32_t>(header + 8, kVersion);
        store_le<uint32_t>(header + 12, kSlotBytes);
        store_le<uint64_t>(header + kSlotsAt, slots);
        if (pwrite(m.fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header) ||
            fdatasync(m.fd) != 0) {
            err = errno_text("cannot write the quota ledger", path);
            return nullptr;
        }
        st.st_size = size;
    } else if (pread(m.fd, header, sizeof header, 0) != static_cast<ssize_t>(sizeof header)) {
        err = "the quota ledger " + path + " is shorter than its header";
        return nullptr;
    }
    m.slots = load_le<uint64_t>(header + kSlotsAt);
    if (std::memcmp(header, kMagic, sizeof kMagic) != 0 || load_le<uint32_t>(header + 8) != kVersion ||
        load_le<uint32_t>(header + 12) != kSlotBytes || m.slots == 0 || m.slots > kMaxSlots ||
        static_cast<uint64_t>(st.st_size) < kHeaderBytes + m.slots * kSlotBytes) {
        err = "the quota ledger " + path + " is not one this build reads";
        return nullptr;
    }
    m.map_len = kHeaderBytes + m.slots * kSlotBytes;
    void *p = mmap(nullptr, m.map_len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                   m.fd, 0);
    if (p == MAP_FAILED) {
        err = errno_text("cannot map the quota ledger", path);
        return nullptr;
    }
    m.map = static_cast<unsigned char *>(p);
    return l;
}

uint64_t QuotaLedger::used(QuotaSubject subject, const unsigned char *id, uint16_t tag) const
    noexcept {
    QuotaRef ref;
    for (int attempt = 0; attempt < 3; attempt++) {
        Impl::Probe p = impl_->probe(subject, id, ref);
        if (p == Impl::Probe::kFound) return used_in(ref, tag);
        if (p == Impl::Probe::kAbsent) return 0;
    }
    return 0;
}

bool QuotaLedger::find(QuotaSubject subject, const unsigned char *id, int64_t now_ms,
                       QuotaRef &out) noexcept {
    if (impl_->probe(subject, id, out) == Impl::Probe::kFound) return true;
    if (!impl_->writable || flock(impl_->fd, LOCK_EX) != 0) return false;
    const bool ok = impl_->claim(subject, id, now_ms, out);
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
            // A word already in a later period (another worker's clock is
            // ahead, or a metered call settles after its period ended) is
            // charged in that period, never set back to ours.
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
        if (!find(subject, id, now_ms, ref)) break;
    }
    *used_after = 0;
    return Charge::kNoRoom;
}

void QuotaLedger::refund(const QuotaRef &ref, uint16_t tag, uint64_t cost) noexcept {
    // A slot charged in this period is not stale, so it has not moved.
    if (__atomic_load_n(ref.seq, __ATOMIC_ACQUIRE) == ref.seen) take_back(ref.word, tag, cost);
}

bool QuotaLedger::entry(uint64_t i, Entry &out) const noexcept {
    if (i >= impl_->slots) return false;
    unsigned char *s = impl_->slot(i);
    const uint32_t seq1 = __atomic_load_n(Impl::seq(s), __ATOMIC_ACQUIRE);
    if (seq1 == 0 || (seq1 & 1)) return false;
    const uint64_t w = __atomic_load_n(Impl::word(s), __ATOMIC_ACQUIRE);
    out.subject = static_cast<QuotaSubject>(__atomic_load_n(s + kSubjectAt, __ATOMIC_RELAXED));
    std::memcpy(out.id, s + kIdAt, KA_ID_LEN);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(Impl::seq(s), __ATOMIC_RELAXED) != seq1) return false;
    out.tag = tag_of(w);
    out.used = w & kUsedMask;
    return w != 0 && out.tag != kMovingTag &&
           (out.subject == QuotaSubject::kKey || out.subject == QuotaSubject::kAccount);
}

bool QuotaLedger::set_others(QuotaSubject subject, const unsigned char *id, uint16_t tag,
                             uint64_t used, int64_t now_ms) noexcept {
    // Under the file lock (keyauth-syncd's, off the request path): the slot
    // cannot go to another subject between finding it and the store.
    if (!impl_->writable || flock(impl_->fd, LOCK_EX) != 0) return false;
    QuotaRef ref;
    const bool ok = impl_->claim(subject, id, now_ms, ref);
    if (ok) {
        uint64_t *o = ref.word + (kOthersAt - kWordAt) / sizeof(uint64_t);
        __atomic_store_n(o, word_of(tag, used > kUsedMask ? kUsedMask : used), __ATOMIC_RELEASE);
    }
    flock(impl_->fd, LOCK_UN);
    return ok;
}

bool QuotaLedger::sync(std::string &err) noexcept {
    if (!impl_->writable) return true;
    if (msync(impl_->map, impl_->map_len, MS_SYNC) != 0) {
        err = errno_text("cannot sync the quota ledger", impl_->path);
        return false;
    }
    return true;
}

uint64_t QuotaLedger::slots() const noexcept { return impl_->slots; }

uint64_t QuotaLedger::slots_in_use() const noexcept {
    return __atomic_load_n(impl_->in_use(), __ATOMIC_RELAXED);
}

}  // namespace keyauth
