// GET /snapshot on keyauth-syncd's --snapshot-listen: a consistent,
// compacted copy of this edge's store for a new edge to start from
// (--bootstrap-from, snapshot_fetch.h; docs/scale-out.md "Adding an edge").
//
// The copy is made by a process of its own (snapshot_copy.h) and streamed
// as it is made, in chunks, never staged in memory or on disk: the head
// carries the copy's mark (Keyauth-Revision, Keyauth-Cluster-Id,
// Keyauth-Schema-Version), the trailer its SHA-256
// (Keyauth-Snapshot-Sha256). Bounded: one copy at a time (429 for another),
// only while the edge is healthy (503 as /healthz), only to the peers
// allowed (403), and a client that does not read for the server's write
// timeout is dropped, which kills the copy.
#pragma once

#include <atomic>
#include <string>

#include "http_exchange.h"
#include "syncd_metrics.h"

namespace keyauth::syncd {

class SnapshotService {
public:
    // `db`: the live store's directory; `allowed`: the peers, packed
    // (ip_allowlist.h); `program`: this executable, run as
    // `program --snapshot-copy db` for each copy.
    SnapshotService(std::string db, std::string allowed, std::string program, Metrics &metrics);

    // An HttpServer handler: never throws.
    HttpResponse handle(const HttpRequest &request) noexcept;

    // The HTTP field names.
    static constexpr const char *kRevisionField = "Keyauth-Revision";
    static constexpr const char *kClusterField = "Keyauth-Cluster-Id";
    static constexpr const char *kSchemaField = "Keyauth-Schema-Version";
    static constexpr const char *kChecksumField = "Keyauth-Snapshot-Sha256";

private:
    HttpResponse start_copy(const std::string &peer);

    std::string db_, allowed_, program_;
    Metrics &metrics_;
    std::atomic<bool> busy_{false};
};

}  // namespace keyauth::syncd
