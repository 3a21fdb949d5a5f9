#include "snapshot_reader.h"

#include <utility>

namespace keyauth::syncd {

SnapshotReader::SnapshotReader(const std::vector<etcd::Client *> &clients, std::string prefix,
                               int64_t page_size, const std::atomic<bool> &stop, size_t ahead)
    : prefix_(std::move(prefix)),
      page_size_(page_size),
      stop_(stop),
      ahead_(ahead == 0 ? 1 : ahead),
      ranges_(snapshot_ranges(prefix_)),
      running_(clients.size()) {
    if (clients.empty()) {
        status_ = {etcd::Errc::kRejected, "the snapshot reader has no etcd client"};
        return;
    }
    for (etcd::Client *c : clients) threads_.emplace_back([this, c] { read_ranges(*c); });
}

SnapshotReader::~SnapshotReader() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        abandoned_ = true;
    }
    changed_.notify_all();
    for (std::thread &t : threads_) t.join();
}

std::optional<Batch> SnapshotReader::next() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return !pages_.empty() || running_ == 0; });
    if (pages_.empty()) {
        if (failed_) std::rethrow_exception(failed_);
        return std::nullopt;
    }
    Batch b = std::move(pages_.front());
    pages_.pop_front();
    lock.unlock();
    changed_.notify_all();  // room for the readers
    return b;
}

void SnapshotReader::read_ranges(etcd::Client &client) {
    etcd::Status s;
    std::exception_ptr failed;
    try {
        for (;;) {
            etcd::RangeRequest range;
            {
                std::unique_lock<std::mutex> lock(mu_);
                // every range but the first waits for the revision its first page pins
                changed_.wait(lock, [this] { return next_range_ == 0 || revision_.load() != 0 || halted(); });
                if (halted() || next_range_ == ranges_.size()) break;
                range = ranges_[next_range_++];
                range.revision = revision_.load();
            }
            int64_t revision = range.revision;
            bool more = true;
            s = client.range_all(
                range, page_size_,
                [&](const etcd::RangeResponse &page) {
                    std::unique_lock<std::mutex> lock(mu_);
                    if (revision_.load() == 0) {  // range_all pinned it before this call
                        revision_.store(revision);
                        changed_.notify_all();
                    }
                    if (page.kvs.empty()) return true;
                    lock.unlock();
                    Batch b = batch_of_kvs(prefix_, page.kvs);  // decoded here, off the applying thread
                    lock.lock();
                    changed_.wait(lock, [this] { return pages_.size() < ahead_ || halted(); });
                    if (halted()) return more = false;
                    pages_.push_back(std::move(b));
                    lock.unlock();
                    changed_.notify_all();
                    return true;
                },
                &revision);
            if (!more) s = {etcd::Errc::kCanceled, "the snapshot was not read whole: stopped"};
            if (!s.ok()) break;
            std::lock_guard<std::mutex> lock(mu_);
            ranges_read_++;
        }
    } catch (...) {
        failed = std::current_exception();
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!failed_ && failed) failed_ = failed;
        if (status_.ok() && !s.ok()) status_ = std::move(s);
        if (--running_ == 0 && status_.ok() && !failed_ && ranges_read_ != ranges_.size())
            status_ = {etcd::Errc::kCanceled, "the snapshot was not read whole: stopped"};
    }
    changed_.notify_all();
}

}  // namespace keyauth::syncd
