// The pages of a rebuild's snapshot, read on threads of their own a few pages
// ahead of the one being applied: etcd answers (and these readers decode) the
// next pages while the rebuild writes one into LMDB, instead of each side
// waiting for the other. Two readers keep etcd answering while one of them
// decodes. Every range is read at the revision the first page was read at:
// one snapshot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcd_client.h"
#include "record_changes.h"

namespace keyauth::syncd {

class SnapshotReader {
public:
    // Starts reading every range of snapshot_ranges(prefix), page_size keys a
    // page, on one thread for each of `clients` (each the reader's alone until
    // it is destroyed), at most `ahead` pages ahead of next(). `stop` (the
    // sync loop's) ends it early.
    SnapshotReader(const std::vector<etcd::Client *> &clients, std::string prefix, int64_t page_size,
                   const std::atomic<bool> &stop, size_t ahead = 4);
    // Stops reading (at most the pages in flight are read whole) and waits.
    ~SnapshotReader();
    SnapshotReader(const SnapshotReader &) = delete;
    SnapshotReader &operator=(const SnapshotReader &) = delete;

    // The next page: each range's pages in order, the ranges in the order the
    // readers finish them. nullopt once every page is read, or reading ended
    // early (status() says why; a throw of a reader's is rethrown here).
    std::optional<Batch> next();
    // After next() returned nullopt: how reading ended (ok only when every
    // page of every range was read; canceled when stopped).
    const etcd::Status &status() const { return status_; }
    // The snapshot's revision, once a page is in (0 before).
    int64_t revision() const { return revision_.load(); }

private:
    void read_ranges(etcd::Client &client);
    bool halted() const { return abandoned_ || failed_ || !status_.ok() || stop_.load(); }

    const std::string prefix_;
    const int64_t page_size_;
    const std::atomic<bool> &stop_;
    const size_t ahead_;
    const std::vector<etcd::RangeRequest> ranges_;
    std::atomic<int64_t> revision_{0};

    std::mutex mu_;
    std::condition_variable changed_;
    std::deque<Batch> pages_;       // read, not yet taken
    size_t next_range_ = 0;         // the next range a reader takes
    size_t ranges_read_ = 0;        // ranges read whole
    size_t running_ = 0;            // readers not yet ended
    bool abandoned_ = false;        // the destructor: read no more
    etcd::Status status_;           // the first failure; set before the last reader ends
    std::exception_ptr failed_;     // likewise
    std::vector<std::thread> threads_;  // last: started once the rest is made
};

}  // namespace keyauth::syncd
