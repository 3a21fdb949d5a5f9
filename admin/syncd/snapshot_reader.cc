#include "snapshot_reader.h"

#include <utility>
#include <vector>

namespace keyauth::syncd {

SnapshotReader::SnapshotReader(etcd::Client &client, std::string prefix, int64_t page_size,
                               const std::atomic<bool> &stop, size_t ahead)
    : client_(client),
      prefix_(std::move(prefix)),
      page_size_(page_size),
      stop_(stop),
      ahead_(ahead == 0 ? 1 : ahead),
      thread_([this] { read_all(); }) {}

SnapshotReader::~SnapshotReader() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        abandoned_ = true;
    }
    changed_.notify_all();
    thread_.join();
}

std::optional<Batch> SnapshotReader::next() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return !pages_.empty() || done_; });
    if (pages_.empty()) {
        if (failed_) std::rethrow_exception(failed_);
        return std::nullopt;
    }
    Batch b = std::move(pages_.front());
    pages_.pop_front();
    lock.unlock();
    changed_.notify_all();  // room for the reader
    return b;
}

void SnapshotReader::read_all() {
    etcd::Status s;
    std::exception_ptr failed;
    try {
        int64_t revision = 0;
        for (etcd::RangeRequest &range : snapshot_ranges(prefix_)) {
            range.revision = revision;
            bool more = true;
            s = client_.range_all(
                range, page_size_,
                [&](const etcd::RangeResponse &page) {
                    revision_.store(revision);  // range_all pinned it before this call
                    if (page.kvs.empty()) return true;
                    Batch b = batch_of_kvs(prefix_, page.kvs);  // decoded here, off the applying thread
                    std::unique_lock<std::mutex> lock(mu_);
                    changed_.wait(lock, [this] { return pages_.size() < ahead_ || abandoned_ || stop_.load(); });
                    if (abandoned_ || stop_.load()) return more = false;
                    pages_.push_back(std::move(b));
                    lock.unlock();
                    changed_.notify_all();
                    return true;
                },
                &revision);
            revision_.store(revision);
            if (!more) s = {etcd::Errc::kCanceled, "the snapshot was not read whole: stopped"};
            if (!s.ok()) break;
        }
    } catch (...) {
        failed = std::current_exception();
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        status_ = std::move(s);
        failed_ = failed;
        done_ = true;
    }
    changed_.notify_all();
}

}  // namespace keyauth::syncd
