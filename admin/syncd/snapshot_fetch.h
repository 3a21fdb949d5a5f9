// The client side of GET /snapshot (snapshot_service.h): a new edge's
// syncd downloads a peer's copy of its store into a file, checking on the
// way that it is whole (the chunked transfer ended) and unchanged (the
// trailer's SHA-256 of what arrived), before anything opens it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "snapshot_copy.h"

namespace keyauth::syncd {

struct SnapshotFetchLimits {
    std::chrono::milliseconds connect{5000};
    // Slower than this many bytes a second for `stall` is a peer that
    // stalled: given up.
    long min_bytes_per_second = 64 * 1024;
    std::chrono::seconds stall{10};
};

struct FetchedSnapshot {
    SnapshotHead head;  // from the answer's head fields
    uint64_t bytes = 0;
};

// Downloads `url` into `file` (created with `mode`; it must not exist).
// False with the reason in `error` for anything but a whole, verified copy:
// the peer unreachable or refusing (its status and error code), the head
// fields missing, a transfer cut short, a checksum that does not match, a
// disk that cannot hold it, `stop` set. The file may then hold part of a
// copy: the caller removes it.
bool fetch_snapshot(const std::string &url, const std::string &file, mode_t mode, const std::atomic<bool> &stop,
                    const SnapshotFetchLimits &limits, FetchedSnapshot &out, std::string &error);

}  // namespace keyauth::syncd
