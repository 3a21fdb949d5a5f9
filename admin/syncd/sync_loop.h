// The etcd side of keyauth-syncd: keeps the Mirror in step with the etcd
// prefix (DESIGN.md, "Scale-out"), on a thread of its own with a Client of
// its own.
//
// Each round asks a member for its status (the cluster id and revision),
// rebuilds the store when it holds no complete snapshot, comes from another
// cluster, is ahead of etcd (a cluster restored from a snapshot), or the
// watch found its revision compacted or sent an answer it could not read
// (one too large, say: watching again would ask for the same), then watches
// the mirrored tables from the revision after the one applied, with progress
// notifications, applying each watch response as one LMDB transaction. A
// progress notification of the synced watch advances the revision (stored at
// most every 5 s), so a quiet edge stays current across compactions. A watch
// that ends (member gone, no leader, silence) is retried with backoff: 100 ms
// doubling to 5 s, with jitter, reset once a watch is established; the
// client moves on to the next endpoint itself.
//
// A batch the store refuses (a record layout this build cannot read) is
// never skipped: the edge stops there and says so (log line naming the etcd
// key, keyauth_syncd_apply_blocked, /healthz 503, a lag that grows), serving
// its copy. It checks the record every backoff (up to 5 s) and, once the
// record is gone or changed, rebuilds from a snapshot, which holds only the
// records that exist now: an edge never stays halted on a deleted record.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "mirror.h"
#include "snapshot_fetch.h"
#include "syncd_metrics.h"

namespace keyauth::syncd {

struct SyncOptions {
    etcd::ClientOptions etcd;
    std::string prefix = "/keyauth/1";
    // keys per range page of a rebuild (one LMDB txn each): a keys_by_hash
    // range of a 1M-key store (about 3,900 keys) in one page, as etcd 3.4
    // walks the rest of the range for every page (1M keys: etcd 18.5 CPU-s
    // against 23 for pages of 1,000)
    int64_t page_size = 5000;
    std::chrono::milliseconds backoff_min{100};
    std::chrono::milliseconds backoff_max{5000};
    // how often a progress notification's revision is written to the store
    std::chrono::milliseconds mark_interval{5000};
    // A watch that hears nothing for this long is given up and made again
    // (etcd sends a progress notification about every second).
    std::chrono::milliseconds watch_silence{5000};
    // Peers' GET /snapshot URLs (--bootstrap-from): a build tries each in
    // turn, then etcd (sync_bootstrap.cc).
    std::vector<std::string> bootstrap_from;
    SnapshotFetchLimits fetch_limits;
};

class SyncLoop {
public:
    // nullptr with a reason when the etcd client cannot be made.
    static std::unique_ptr<SyncLoop> make(SyncOptions options, Mirror &mirror, Metrics &metrics,
                                          std::string &error);
    ~SyncLoop();
    SyncLoop(const SyncLoop &) = delete;
    SyncLoop &operator=(const SyncLoop &) = delete;

    // Mirrors until stop(). Never throws: an unexpected error is logged and
    // the round retried after a backoff.
    void run() noexcept;
    // From any thread: run() returns soon after (the etcd call in progress
    // is canceled at once).
    void stop() noexcept;

private:
    enum class Next { kWatch, kRebuild, kBackoff, kStop };

    SyncLoop(SyncOptions options, Mirror &mirror, Metrics &metrics, std::unique_ptr<etcd::Client> client,
             std::unique_ptr<etcd::Client> second_reader);

    // The record a refused batch is stuck on, as etcd holds it.
    struct Blocked {
        std::string etcd_key;
        std::optional<std::string> value;
    };

    Next round();
    Next rebuild(uint64_t cluster_id, int64_t etcd_revision, const std::string &reason);
    // The store from a peer's snapshot at `url`, swapped in: true; false
    // (logged, counted, the live store as it was) to fall back.
    bool bootstrap(const std::string &url, uint64_t cluster_id, int64_t etcd_revision);
    bool bootstrap_refused(const std::string &url, const std::string &why);
    // After a build swapped in at `revision`.
    void built(int64_t revision);
    // Whether the record the edge is stuck on is gone or changed in etcd.
    Next blocked_record_changed(bool &changed);
    void block(const char *during, const std::vector<RecordChange> &changes, const std::optional<Refusal> &r,
               const std::string &error, int64_t revision);
    // The highest revision the store is known to hold all of (the stored
    // mark, or a later progress notification's).
    int64_t known_revision() const;
    void note_progress(int64_t revision);
    Next watch();
    Next etcd_failed(const char *call, const etcd::Status &status);
    void apply_failed(const char *during, const std::string &error, int64_t revision);
    // The delay before the next try after a failure that `step` paces; the
    // step doubles (jitter: half to all of it).
    std::chrono::milliseconds next_backoff(std::chrono::milliseconds &step);
    void pause(std::chrono::milliseconds how_long);
    bool stopping() const { return stop_.load(); }

    SyncOptions options_;
    Mirror &mirror_;
    Metrics &metrics_;
    std::unique_ptr<etcd::Client> client_;
    std::unique_ptr<etcd::Client> second_reader_;  // a rebuild reads its snapshot on both
    std::atomic<bool> stop_{false};
    std::mutex mutex_;
    std::condition_variable wake_;
    std::chrono::milliseconds backoff_;        // etcd failures: reset once a watch is established
    std::chrono::milliseconds apply_backoff_;  // refused batches: reset once one applies
    std::chrono::milliseconds pending_backoff_{0};  // announced in a log line, then slept
    std::optional<std::string> rebuild_reason_;   // the next round rebuilds, and why
    std::optional<Blocked> blocked_;
    int64_t notified_revision_ = 0;  // from progress notifications, maybe not stored yet
    std::chrono::steady_clock::time_point mark_stored_{};
    std::minstd_rand jitter_;
};

}  // namespace keyauth::syncd
