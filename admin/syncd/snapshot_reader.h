// The pages of a rebuild's snapshot, read on a thread of its own a few pages
// ahead of the one being applied: etcd answers (and this reader decodes) the
// next pages while the rebuild writes one into LMDB, instead of each side
// waiting for the other. Every range is read at the revision the first page
// was read at: one snapshot.
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

#include "etcd_client.h"
#include "record_changes.h"

namespace keyauth::syncd {

class SnapshotReader {
public:
    // Starts reading every range of snapshot_ranges(prefix), page_size keys a
    // page, at most `ahead` pages ahead of next(). `client` is the reader's
    // alone until it is destroyed; `stop` (the sync loop's) ends it early.
    SnapshotReader(etcd::Client &client, std::string prefix, int64_t page_size,
                   const std::atomic<bool> &stop, size_t ahead = 4);
    // Stops reading (at most the page in flight is read whole) and waits.
    ~SnapshotReader();
    SnapshotReader(const SnapshotReader &) = delete;
    SnapshotReader &operator=(const SnapshotReader &) = delete;

    // The next page, in etcd's order; nullopt once every page is read, or
    // reading ended early (status() says why; a throw of the reader's is
    // rethrown here).
    std::optional<Batch> next();
    // After next() returned nullopt: how reading ended (ok only when every
    // page was read; canceled when stopped).
    const etcd::Status &status() const { return status_; }
    // The snapshot's revision, once a page is in (0 before).
    int64_t revision() const { return revision_.load(); }

private:
    void read_all();

    etcd::Client &client_;
    const std::string prefix_;
    const int64_t page_size_;
    const std::atomic<bool> &stop_;
    const size_t ahead_;
    std::atomic<int64_t> revision_{0};

    std::mutex mu_;
    std::condition_variable changed_;
    std::deque<Batch> pages_;       // read, not yet taken
    bool done_ = false;             // the reader has ended
    bool abandoned_ = false;        // the destructor: read no more
    etcd::Status status_;           // set before done_
    std::exception_ptr failed_;     // set before done_
    std::thread thread_;            // last: started once the rest is made
};

}  // namespace keyauth::syncd
