// SyncLoop's build from a peer's snapshot (--bootstrap-from): the copy is
// received beside the live store, checked against etcd, and swapped in as a
// rebuild is; the watch then resumes from its revision. Anything amiss
// falls back: the next peer, then the rebuild from etcd.
#include <chrono>
#include <string>

#include "keyauth_schema.h"
#include "record_changes.h"
#include "snapshot_fetch.h"
#include "sync_loop.h"
#include "syncd_log.h"

namespace keyauth::syncd {

bool SyncLoop::bootstrap_refused(const std::string &url, const std::string &why) {
    metrics_.add_bootstrap_refused();
    log_event("bootstrap refused", {{"url", url}, {"reason", why}});
    return false;
}

bool SyncLoop::bootstrap(const std::string &url, uint64_t cluster_id, int64_t etcd_revision) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    log_event("bootstrap started", {{"url", url}, {"clusterId", cluster_id}, {"etcdRevision", etcd_revision}});
    std::unique_ptr<Mirror::Rebuild> copy = mirror_.begin_copy();  // removed unless swapped in
    FetchedSnapshot got;
    std::string why;
    if (!fetch_snapshot(url, mirror_.copy_file(), mirror_.copy_mode(), stop_, options_.fetch_limits, got, why)) {
        return stopping() ? false : bootstrap_refused(url, why);
    }
    const SnapshotHead &h = got.head;
    if (h.cluster_id != cluster_id) {
        return bootstrap_refused(url, "another etcd cluster: the copy's " + std::to_string(h.cluster_id) +
                                          ", etcd's " + std::to_string(cluster_id));
    }
    if (h.schema_version != KA_SCHEMA_VERSION) {
        return bootstrap_refused(url, "schema version " + std::to_string(h.schema_version) + ", this build's " +
                                          std::to_string(KA_SCHEMA_VERSION));
    }
    if (h.revision > etcd_revision) {
        return bootstrap_refused(url, "revision " + std::to_string(h.revision) + " is ahead of etcd's " +
                                          std::to_string(etcd_revision));
    }
    // The watch resumes at revision + 1: etcd must still hold it.
    etcd::RangeRequest probe;
    probe.key = watched_prefix(options_.prefix);
    probe.range_end = watched_end(options_.prefix);
    probe.revision = h.revision;
    probe.count_only = true;
    etcd::RangeResponse answer;
    if (etcd::Status s = client_->range(probe, answer); !s.ok()) {
        if (s.code == etcd::Errc::kCompacted) {
            return bootstrap_refused(url, "revision " + std::to_string(h.revision) +
                                              " is compacted in etcd (compact revision " +
                                              std::to_string(s.compact_revision) + ")");
        }
        return bootstrap_refused(url, std::string("etcd cannot confirm the copy's revision: ") +
                                          etcd::errc_name(s.code) + ": " + s.message);
    }
    if (!mirror_.finish_copy(std::move(copy), MirrorMark{h.revision, h.cluster_id}, why)) {
        return bootstrap_refused(url, why);
    }
    built(h.revision);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    metrics_.set_built(true, seconds, url);
    log_event("bootstrap finished", {{"url", url},
                                     {"revision", h.revision},
                                     {"clusterId", h.cluster_id},
                                     {"bytes", got.bytes},
                                     {"ms", static_cast<int64_t>(seconds * 1000)}});
    return true;
}

}  // namespace keyauth::syncd
