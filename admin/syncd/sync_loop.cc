#include "sync_loop.h"

#include <lmdb++.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include "etcd_keyspace.h"
#include "record_changes.h"
#include "snapshot_reader.h"
#include "store_error.h"
#include "syncd_log.h"

namespace keyauth::syncd {
namespace {

using Clock = std::chrono::steady_clock;

// The most record changes of answers at hand one LMDB write takes.
constexpr size_t kMaxMergedChanges = 50'000;

int64_t ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

std::unique_ptr<SyncLoop> SyncLoop::make(SyncOptions options, Mirror &mirror, Metrics &metrics,
                                         std::string &error) {
    auto client = etcd::Client::make(options.etcd, error);
    if (!client) return nullptr;
    auto second = etcd::Client::make(options.etcd, error);
    if (!second) return nullptr;
    return std::unique_ptr<SyncLoop>(
        new SyncLoop(std::move(options), mirror, metrics, std::move(client), std::move(second)));
}

SyncLoop::SyncLoop(SyncOptions options, Mirror &mirror, Metrics &metrics,
                   std::unique_ptr<etcd::Client> client, std::unique_ptr<etcd::Client> second_reader)
    : options_(std::move(options)),
      mirror_(mirror),
      metrics_(metrics),
      client_(std::move(client)),
      second_reader_(std::move(second_reader)),
      backoff_(options_.backoff_min),
      apply_backoff_(options_.backoff_min),
      jitter_(std::random_device{}()) {
    if (mirror_.mark()) metrics_.set_applied(mirror_.mark()->revision);
}

SyncLoop::~SyncLoop() = default;

void SyncLoop::stop() noexcept {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
    }
    client_->cancel();
    second_reader_->cancel();
    wake_.notify_all();
}

void SyncLoop::run() noexcept {
    while (!stopping()) {
        Next next;
        try {
            next = round();
        } catch (const std::exception &e) {
            // a file system step of a rebuild, LMDB itself (a full map), ...
            pending_backoff_ = next_backoff(backoff_);
            try {
                log_event("sync error", {{"error", e.what()}, {"retryInMs", pending_backoff_.count()}});
            } catch (...) {
            }
            next = Next::kBackoff;
        } catch (...) {
            pending_backoff_ = next_backoff(backoff_);
            next = Next::kBackoff;
        }
        metrics_.set_etcd_up(false);
        if (next == Next::kStop) break;
        if (next == Next::kBackoff) pause(pending_backoff_);
    }
    metrics_.set_etcd_up(false);
}

int64_t SyncLoop::known_revision() const {
    const std::optional<MirrorMark> &mark = mirror_.mark();
    return std::max(mark ? mark->revision : 0, notified_revision_);
}

// One status call, a rebuild if one is due, then one watch until it ends.
SyncLoop::Next SyncLoop::round() {
    etcd::StatusResponse st;
    etcd::Status s = client_->status(st);
    if (!s.ok()) return etcd_failed("status", s);
    const uint64_t cluster = st.header.cluster_id;
    if (blocked_) {
        bool changed = false;
        Next n = blocked_record_changed(changed);
        if (n != Next::kWatch) return n;
        if (!changed) {
            pending_backoff_ = next_backoff(apply_backoff_);
            return Next::kBackoff;
        }
        rebuild_reason_ = "the record that could not be applied is gone or changed";
    }
    const std::optional<MirrorMark> &mark = mirror_.mark();
    std::string reason;
    if (rebuild_reason_) {
        reason = *rebuild_reason_;
    } else if (!mark) {
        reason = "no complete snapshot";
    } else if (mark->cluster_id != cluster) {
        reason = "another etcd cluster";
    } else if (st.header.revision < known_revision()) {
        // a cluster restored from a snapshot: its revisions up to the mark
        // are other writes than the ones this store holds
        reason = "etcd's revision " + std::to_string(st.header.revision) + " is behind this store's " +
                 std::to_string(known_revision()) + " (restored from a snapshot?)";
    }
    rebuild_reason_.reset();
    if (!reason.empty()) {
        Next n = rebuild(cluster, st.header.revision, reason);
        if (n != Next::kWatch) return n;
    }
    return watch();
}

SyncLoop::Next SyncLoop::blocked_record_changed(bool &changed) {
    etcd::RangeRequest r;
    r.key = blocked_->etcd_key;
    etcd::RangeResponse out;
    etcd::Status s = client_->range(r, out);
    if (!s.ok()) return etcd_failed("range", s);
    std::optional<std::string> now;
    if (!out.kvs.empty()) now = out.kvs.front().value;
    changed = now != blocked_->value;
    return Next::kWatch;
}

void SyncLoop::block(const char *during, const std::vector<RecordChange> &changes,
                     const std::optional<Refusal> &r, const std::string &error, int64_t revision) {
    Blocked b;
    std::string why = error;
    if (r && r->index < changes.size()) {
        const RecordChange &c = changes[r->index];
        b.etcd_key = etcd_record_key(options_.prefix, c.table, c.key);
        b.value = c.value;
        why = "cannot apply " + b.etcd_key + ": " + r->error;
    }
    blocked_ = std::move(b);
    metrics_.set_blocked(true, why);
    apply_failed(during, why, revision);
}

void SyncLoop::note_progress(int64_t revision) {
    if (revision <= known_revision()) return;
    notified_revision_ = revision;
    metrics_.set_applied(revision);
    // stored now and then: a crash costs only a watch from an older mark
    if (Clock::now() - mark_stored_ >= options_.mark_interval) {
        mirror_.apply({}, revision);
        mark_stored_ = Clock::now();
    }
}

SyncLoop::Next SyncLoop::rebuild(uint64_t cluster_id, int64_t etcd_revision, const std::string &reason) {
    if (!blocked_) {  // a record this build cannot apply: a peer's copy holds none of it
        for (const std::string &url : options_.bootstrap_from) {
            if (stopping()) return Next::kStop;
            if (bootstrap(url, cluster_id, etcd_revision)) return Next::kWatch;
        }
    }
    const auto t0 = Clock::now();
    const std::optional<MirrorMark> &old = mirror_.mark();
    log_event("rebuild started", {{"reason", reason},
                                  {"clusterId", cluster_id},
                                  {"prefix", options_.prefix},
                                  {"fromRevision", old ? old->revision : 0}});
    std::unique_ptr<Mirror::Rebuild> rb = mirror_.begin_rebuild();
    std::optional<std::string> refused;  // by apply_records or LMDB
    std::vector<RecordChange> refused_page;
    std::optional<Refusal> refusal;
    std::exception_ptr failed;            // anything else
    // a long rebuild (millions of keys) says how far it is every 5 s
    auto next_progress = t0 + std::chrono::seconds(5);
    etcd::Status s;
    int64_t revision = 0;
    {
        // etcd answers the next pages while this thread writes one
        SnapshotReader reader({client_.get(), second_reader_.get()}, options_.prefix, options_.page_size, stop_);
        try {
            while (std::optional<Batch> b = reader.next()) {
                try {
                    rb->add(b->changes);
                } catch (const StoreError &e) {  // a record this build cannot apply
                    refused = e.what();
                    refusal = rb->refused(b->changes);
                    refused_page = std::move(b->changes);
                    break;
                } catch (const std::exception &e) {  // lmdb::error: a full map...
                    refused = e.what();
                    break;
                }
                if (Clock::now() >= next_progress) {
                    log_event("rebuild progress", {{"records", rb->records()}, {"ms", ms_since(t0)}});
                    next_progress = Clock::now() + std::chrono::seconds(5);
                }
                if (stopping()) break;
            }
        } catch (...) {  // the reader's, or anything else
            failed = std::current_exception();
        }
        revision = reader.revision();
        if (!refused && !failed && !stopping()) s = reader.status();
    }  // the reader stops and is gone: the clients are this thread's again
    if (failed) std::rethrow_exception(failed);  // run() logs it; the Rebuild removes its directory
    if (refused) {
        if (refusal) {
            block("rebuild", refused_page, refusal, *refused, revision);
        } else {
            apply_failed("rebuild", *refused, revision);
        }
        return Next::kBackoff;
    }
    if (stopping()) return Next::kStop;
    if (!s.ok()) return etcd_failed("range", s);
    const size_t records = rb->records();
    mirror_.finish_rebuild(std::move(rb), MirrorMark{revision, cluster_id});
    built(revision);
    metrics_.add_rebuild();
    metrics_.set_built(false, static_cast<double>(ms_since(t0)) / 1000.0);
    log_event("rebuild finished",
              {{"records", records}, {"revision", revision}, {"clusterId", cluster_id}, {"ms", ms_since(t0)}});
    return Next::kWatch;
}

void SyncLoop::built(int64_t revision) {
    apply_backoff_ = options_.backoff_min;
    notified_revision_ = 0;
    mark_stored_ = Clock::now();
    if (blocked_) log_event("record applied again", {{"etcdKey", blocked_->etcd_key}});
    blocked_.reset();
    metrics_.set_blocked(false);
    metrics_.set_applied(revision);
    metrics_.current();
}

SyncLoop::Next SyncLoop::watch() {
    etcd::WatchCreateRequest w;
    w.key = watched_prefix(options_.prefix);
    w.range_end = watched_end(options_.prefix);
    w.start_revision = known_revision() + 1;
    w.progress_notify = true;
    etcd::WatchOptions wo;
    wo.silence_timeout = options_.watch_silence;
    wo.stop = &stop_;

    bool refused = false;
    std::exception_ptr failed;
    // Applies one batch whose answer's header said `header`. kRefused: a
    // record this build cannot apply, nothing written; the edge blocks on it
    // unless `merged` (the caller splits the batch first). kEnded: the watch
    // must end (blocked, or an error).
    enum class Applied { kApplied, kRefused, kEnded };
    auto apply = [&](const Batch &b, int64_t header, bool merged) {
        try {
            mirror_.apply(b.changes, b.revision);
        } catch (const StoreError &e) {
            if (merged) return Applied::kRefused;
            block("watch", b.changes, mirror_.refused(b.changes), e.what(), b.revision);
            refused = true;
            return Applied::kEnded;
        } catch (const std::exception &e) {  // lmdb::error: a full map...
            apply_failed("watch", e.what(), b.revision);
            refused = true;
            return Applied::kEnded;
        } catch (...) {
            failed = std::current_exception();
            return Applied::kEnded;
        }
        apply_backoff_ = options_.backoff_min;
        metrics_.add_events(b.read);
        metrics_.set_applied(known_revision());
        // a catch-up batch's header is ahead of its events: current only
        // once the batch reaches it
        if (header <= known_revision()) metrics_.current();
        return Applied::kApplied;
    };
    // Answers already at hand are applied together, in one LMDB write (one
    // key_slots pass, one fsync), up to kMaxMergedChanges: a watch that fell
    // behind (a paused or busy edge) catches up in a few large writes rather
    // than one for each etcd txn, and an answer alone is applied at once.
    struct Answer {
        Batch batch;
        int64_t header;  // the answer's header revision
    };
    std::vector<Answer> pending;
    size_t pending_changes = 0;
    auto apply_pending = [&]() -> bool {
        std::vector<Answer> answers = std::move(pending);
        pending.clear();
        pending_changes = 0;
        if (answers.size() > 1) {
            Batch merged;
            for (const Answer &a : answers) {
                merged.changes.insert(merged.changes.end(), a.batch.changes.begin(), a.batch.changes.end());
                merged.revision = std::max(merged.revision, a.batch.revision);
                merged.read += a.batch.read;
                merged.skipped += a.batch.skipped;
            }
            const Applied a = apply(merged, answers.back().header, /*merged=*/true);
            if (a != Applied::kRefused) return a == Applied::kApplied;
            // a record this build cannot apply: the answers land one by one,
            // as they would have alone, so that those before it (a
            // revocation among them) are in force while the edge is blocked
            // on the one that holds it
        }
        for (const Answer &a : answers) {
            if (apply(a.batch, a.header, /*merged=*/false) != Applied::kApplied) return false;
        }
        return true;
    };
    etcd::Status s = client_->watch(w, wo, [&](const etcd::WatchResponse &r) {
        if (r.created) {
            if (r.header.revision < w.start_revision - 1) {
                // the member is behind what this store holds: restored
                rebuild_reason_ = "etcd's revision " + std::to_string(r.header.revision) +
                                  " is behind this store's " + std::to_string(w.start_revision - 1) +
                                  " (restored from a snapshot?)";
                return false;
            }
            metrics_.set_etcd_up(true);
            backoff_ = options_.backoff_min;
            log_event("watch established",
                      {{"endpoint", client_->preferred_endpoint()}, {"fromRevision", w.start_revision}});
            return true;
        }
        if (r.events.empty()) {
            if (!apply_pending()) return false;
            // a progress notification: the synced watch has sent everything
            // up to its revision, and nothing in the range changed
            note_progress(r.header.revision);
            metrics_.current();
            return !stopping();
        }
        Batch b = batch_of_events(options_.prefix, r.events);
        pending_changes += b.changes.size();
        pending.push_back({std::move(b), r.header.revision});
        if (r.more_at_hand && pending_changes < kMaxMergedChanges && !stopping()) return true;
        if (!apply_pending()) return false;
        return !stopping();
    });
    metrics_.set_etcd_up(false);
    if (failed) std::rethrow_exception(failed);
    if (refused) return Next::kBackoff;
    if (stopping()) return Next::kStop;
    if (rebuild_reason_) return Next::kRebuild;
    if (s.ok()) return Next::kWatch;
    return etcd_failed("watch", s);
}

SyncLoop::Next SyncLoop::etcd_failed(const char *call, const etcd::Status &status) {
    if (status.code == etcd::Errc::kCanceled || stopping()) return Next::kStop;
    if (status.code == etcd::Errc::kCompacted) {
        log_event("etcd revision compacted",
                  {{"call", call}, {"compactRevision", status.compact_revision}, {"message", status.message}});
        rebuild_reason_ = "revision compacted";
        return Next::kRebuild;
    }
    if (status.code == etcd::Errc::kBadAnswer && std::string_view(call) == "watch") {
        // watching again would ask for the same answer (one over the size
        // bound, say): a snapshot holds only the records that exist now
        rebuild_reason_ = "a watch answer could not be read: " + status.message;
    }
    pending_backoff_ = next_backoff(backoff_);
    log_event("etcd error", {{"call", call},
                             {"code", etcd::errc_name(status.code)},
                             {"message", status.message},
                             {"retryInMs", pending_backoff_.count()}});
    return Next::kBackoff;
}

void SyncLoop::apply_failed(const char *during, const std::string &error, int64_t revision) {
    metrics_.add_apply_error();
    pending_backoff_ = next_backoff(apply_backoff_);
    log_event("apply refused", {{"during", during},
                                {"error", error},
                                {"revision", revision},
                                {"appliedRevision", mirror_.mark() ? mirror_.mark()->revision : 0},
                                {"retryInMs", pending_backoff_.count()}});
}

// The current step with jitter (half to all of it); the step doubles up to
// the maximum.
std::chrono::milliseconds SyncLoop::next_backoff(std::chrono::milliseconds &step) {
    std::uniform_int_distribution<int64_t> pick(step.count() / 2, step.count());
    const std::chrono::milliseconds delay(pick(jitter_));
    step = std::min(step * 2, options_.backoff_max);
    return delay;
}

void SyncLoop::pause(std::chrono::milliseconds how_long) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, how_long, [this] { return stop_.load(); });
}

}  // namespace keyauth::syncd
