// The quota ledger's file: made, opened, mapped table by table, grown,
// synced (quota_ledger.h; the layout: quota_ledger_layout.h).
#include "quota_ledger_layout.h"

namespace keyauth {

bool QuotaLedger::Impl::remap_slow() noexcept {
    try {
        std::lock_guard<std::mutex> lock(remap_mu);
        return map_new_tables();
    } catch (...) {  // the mutex failed: tried again next time
        return false;
    }
}

bool QuotaLedger::Impl::map_new_tables() noexcept {
    const uint32_t want = tables_in_file();
    for (uint32_t t = mapped.load(std::memory_order_relaxed); t < want; t++) {
        const uint64_t n = table_slots_in_file(t);
        if (n == 0 || n > kMaxSlots) return false;
        const size_t len = n * kSlotBytes;
        void *p = mmap(nullptr, len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
                       static_cast<off_t>(table_offset(t)));
        if (p == MAP_FAILED) return false;
        tables[t] = Table{static_cast<unsigned char *>(p), n, len, true};
        capacity.fetch_add(n, std::memory_order_relaxed);
        mapped.store(t + 1, std::memory_order_release);
    }
    return true;
}

bool QuotaLedger::Impl::append_table(uint64_t n, std::string &err) {
    remap();
    const uint32_t t = tables_in_file();
    if (t >= kMaxTables || t != mapped.load(std::memory_order_acquire)) {
        err = "the quota ledger " + path + " has as many tables as it can hold";
        return false;
    }
    const uint64_t offset = table_offset(t);
    const int rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(n * kSlotBytes));
    if (rc != 0) {
        errno = rc;
        err = errno_text("cannot grow the quota ledger", path);
        return false;
    }
    __atomic_store_n(header_u64(kTableSlotsAt + 8 * t), n, __ATOMIC_RELEASE);
    __atomic_store_n(header_tables(), t + 1, __ATOMIC_RELEASE);
    if (!remap()) {
        err = errno_text("cannot map the quota ledger's new table", path);
        return false;
    }
    return true;
}

QuotaLedger::QuotaLedger() : impl_(new Impl()) {}

QuotaLedger::~QuotaLedger() {
    for (auto &t : impl_->tables) {
        if (t.own_map) munmap(t.slots, t.map_len);
    }
    if (impl_->map) munmap(impl_->map, impl_->map_len);
    if (impl_->fd >= 0) close(impl_->fd);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open(const std::string &path, bool writable,
                                               std::string &err, uint64_t slots) {
    return open_file(path, writable, writable, err, slots);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open_existing(const std::string &path, std::string &err) {
    return open_file(path, true, false, err, 0);
}

std::unique_ptr<QuotaLedger> QuotaLedger::open_file(const std::string &path, bool writable,
                                                    bool create, std::string &err,
                                                    uint64_t slots) {
    std::unique_ptr<QuotaLedger> l(new QuotaLedger());
    Impl &m = *l->impl_;
    m.path = path;
    m.writable = writable;
    const uint64_t asked = slots;
    if (create && slots == 0) slots = kDefaultSlots;
    if (create && (slots < kMinSlots || slots > kMaxSlots)) {
        err = "quota ledger slots out of range (1 to 67108864)";
        return nullptr;
    }
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
        store_le<uint32_t>(header + kTablesAt, 1);
        store_le<uint64_t>(header + kTableSlotsAt, slots);
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
    const uint64_t first = load_le<uint64_t>(header + kSlotsAt);
    if (std::memcmp(header, kMagic, sizeof kMagic) != 0 || load_le<uint32_t>(header + 8) != kVersion ||
        load_le<uint32_t>(header + 12) != kSlotBytes || first == 0 || first > kMaxSlots ||
        static_cast<uint64_t>(st.st_size) < kHeaderBytes + first * kSlotBytes) {
        err = "the quota ledger " + path + " is not one this build reads";
        return nullptr;
    }
    m.map_len = kHeaderBytes + first * kSlotBytes;
    void *p = mmap(nullptr, m.map_len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                   m.fd, 0);
    if (p == MAP_FAILED) {
        err = errno_text("cannot map the quota ledger", path);
        return nullptr;
    }
    m.map = static_cast<unsigned char *>(p);
    m.tables[0] = Impl::Table{m.map + kHeaderBytes, first, 0, false};
    m.capacity.store(first, std::memory_order_relaxed);
    m.mapped.store(1, std::memory_order_release);
    if (!m.remap()) {
        err = errno_text("cannot map the quota ledger's tables", path);
        return nullptr;
    }
    // a ledger made smaller than asked (an earlier size, or another
    // directive value) grows to it here, before any request
    if (create && asked > m.capacity.load(std::memory_order_relaxed) &&
        !m.append_table(asked - m.capacity.load(std::memory_order_relaxed), err)) {
        return nullptr;
    }
    return l;
}

bool QuotaLedger::grow(uint64_t slots, std::string &err) noexcept {
    if (!impl_->writable) {
        err = "the quota ledger is open read-only";
        return false;
    }
    if (slots > kMaxSlots) slots = kMaxSlots;
    if (flock(impl_->fd, LOCK_EX) != 0) {
        err = errno_text("cannot lock the quota ledger", impl_->path);
        return false;
    }
    bool ok = true;
    try {
        impl_->remap();
        const uint64_t have = impl_->capacity.load(std::memory_order_relaxed);
        if (slots > have) {
            ok = impl_->append_table(slots - have, err);
        }
    } catch (...) {
        ok = false;
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
    const uint32_t n = impl_->mapped.load(std::memory_order_acquire);
    for (uint32_t t = 1; t < n; t++) {
        if (msync(impl_->tables[t].slots, impl_->tables[t].map_len, MS_SYNC) != 0) {
            err = errno_text("cannot sync the quota ledger", impl_->path);
            return false;
        }
    }
    return true;
}

uint64_t QuotaLedger::slots() const noexcept { return impl_->capacity.load(std::memory_order_acquire); }

void QuotaLedger::refresh() noexcept { impl_->remap(); }

uint64_t QuotaLedger::slots_in_use() const noexcept {
    return __atomic_load_n(impl_->header_u64(kInUseAt), __ATOMIC_RELAXED);
}

uint64_t QuotaLedger::live_slots() const noexcept {
    return __atomic_load_n(impl_->header_u64(kLiveAt), __ATOMIC_RELAXED);
}

void QuotaLedger::set_live_slots(uint64_t live) noexcept {
    if (impl_->writable) __atomic_store_n(impl_->header_u64(kLiveAt), live, __ATOMIC_RELAXED);
}

uint64_t QuotaLedger::no_room() const noexcept {
    return __atomic_load_n(impl_->header_u64(kNoRoomAt), __ATOMIC_RELAXED);
}

}  // namespace keyauth
