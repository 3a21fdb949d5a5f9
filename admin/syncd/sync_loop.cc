#include "sync_loop.h"

#include <lmdb++.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "record_changes.h"
#include "syncd_log.h"

namespace keyauth::syncd {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ms_since(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

}  // namespace

std::unique_ptr<SyncLoop> SyncLoop::make(SyncOptions options, Mirror &mirror, Metrics &metrics,
                                         std::string &error) {
    auto client = etcd::Client::make(options.etcd, error);
    if (!client) return nullptr;
    return std::unique_ptr<SyncLoop>(new SyncLoop(std::move(options), mirror, metrics, std::move(client)));
}

SyncLoop::SyncLoop(SyncOptions options, Mirror &mirror, Metrics &metrics,
                   std::unique_ptr<etcd::Client> client)
    : options_(std::move(options)),
      mirror_(mirror),
      metrics_(metrics),
      client_(std::move(client)),
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
    wake_.notify_all();
}

void SyncLoop::run() noexcept {
    bool rebuild_asked = false;
    while (!stopping()) {
        Next next;
        try {
            next = round(rebuild_asked);
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
        rebuild_asked = next == Next::kRebuild;
        if (next == Next::kStop) break;
        if (next == Next::kBackoff) pause(pending_backoff_);
    }
    metrics_.set_etcd_up(false);
}

// One status call, a rebuild if one is due, then one watch until it ends.
SyncLoop::Next SyncLoop::round(bool rebuild_asked) {
    etcd::StatusResponse st;
    etcd::Status s = client_->status(st);
    if (!s.ok()) return etcd_failed("status", s);
    const uint64_t cluster = st.header.cluster_id;
    const std::optional<MirrorMark> &mark = mirror_.mark();
    const char *reason = rebuild_asked               ? "revision compacted"
                         : !mark                     ? "no complete snapshot"
                         : mark->cluster_id != cluster ? "another etcd cluster"
                                                     : nullptr;
    if (reason != nullptr) {
        Next n = rebuild(cluster, reason);
        if (n != Next::kWatch) return n;
    }
    return watch();
}

SyncLoop::Next SyncLoop::rebuild(uint64_t cluster_id, const char *reason) {
    const auto t0 = Clock::now();
    const std::optional<MirrorMark> &old = mirror_.mark();
    log_event("rebuild started", {{"reason", reason},
                                  {"clusterId", cluster_id},
                                  {"prefix", options_.prefix},
                                  {"fromRevision", old ? old->revision : 0}});
    std::unique_ptr<Mirror::Rebuild> rb = mirror_.begin_rebuild();
    int64_t revision = 0;
    std::optional<std::string> refused;  // by apply_records or LMDB
    std::exception_ptr failed;            // anything else
    // a long rebuild (millions of keys) says how far it is every 5 s
    auto next_progress = t0 + std::chrono::seconds(5);
    etcd::Status s;
    // every range at the revision the first one was read at: one snapshot
    for (etcd::RangeRequest &range : snapshot_ranges(options_.prefix)) {
        range.revision = revision;
        s = client_->range_all(
            range, options_.page_size,
            [&](const etcd::RangeResponse &page) {
                if (page.kvs.empty()) return true;
                try {
                    rb->add(batch_of_kvs(options_.prefix, page.kvs).changes);
                    if (Clock::now() >= next_progress) {
                        log_event("rebuild progress", {{"records", rb->records()}, {"ms", ms_since(t0)}});
                        next_progress = Clock::now() + std::chrono::seconds(5);
                    }
                } catch (const std::exception &e) {  // StoreError: refused; lmdb::error: a full map...
                    refused = e.what();
                    return false;
                } catch (...) {
                    failed = std::current_exception();
                    return false;
                }
                return !stopping();
            },
            &revision);
        if (!s.ok() || failed || refused || stopping()) break;
    }
    if (failed) std::rethrow_exception(failed);  // run() logs it; the Rebuild removes its directory
    if (refused) {
        apply_failed("rebuild", *refused, revision);
        return Next::kBackoff;
    }
    if (stopping()) return Next::kStop;
    if (!s.ok()) return etcd_failed("range", s);
    const size_t records = rb->records();
    mirror_.finish_rebuild(std::move(rb), MirrorMark{revision, cluster_id});
    apply_backoff_ = options_.backoff_min;
    metrics_.add_rebuild();
    metrics_.set_applied(revision);
    log_event("rebuild finished",
              {{"records", records}, {"revision", revision}, {"clusterId", cluster_id}, {"ms", ms_since(t0)}});
    return Next::kWatch;
}

SyncLoop::Next SyncLoop::watch() {
    etcd::WatchCreateRequest w;
    w.key = watched_prefix(options_.prefix);
    w.range_end = watched_end(options_.prefix);
    w.start_revision = mirror_.mark()->revision + 1;
    w.progress_notify = true;
    etcd::WatchOptions wo;
    wo.silence_timeout = options_.watch_silence;
    wo.stop = &stop_;

    bool refused = false;
    std::exception_ptr failed;
    etcd::Status s = client_->watch(w, wo, [&](const etcd::WatchResponse &r) {
        if (r.created) {
            metrics_.set_etcd_up(true);
            backoff_ = options_.backoff_min;
            log_event("watch established",
                      {{"endpoint", client_->preferred_endpoint()}, {"fromRevision", w.start_revision}});
            return true;
        }
        metrics_.heard();
        if (r.events.empty()) return true;  // a progress notification: nothing changed
        Batch b = batch_of_events(options_.prefix, r.events);
        try {
            mirror_.apply(b.changes, b.revision);
        } catch (const std::exception &e) {  // StoreError: refused; lmdb::error: a full map...
            apply_failed("watch", e.what(), b.revision);
            refused = true;
            return false;
        } catch (...) {
            failed = std::current_exception();
            return false;
        }
        apply_backoff_ = options_.backoff_min;
        metrics_.add_events(b.read);
        metrics_.set_applied(mirror_.mark()->revision);
        return !stopping();
    });
    metrics_.set_etcd_up(false);
    if (failed) std::rethrow_exception(failed);
    if (refused) return Next::kBackoff;
    if (stopping()) return Next::kStop;
    if (s.ok()) return Next::kWatch;
    return etcd_failed("watch", s);
}

SyncLoop::Next SyncLoop::etcd_failed(const char *call, const etcd::Status &status) {
    if (status.code == etcd::Errc::kCanceled || stopping()) return Next::kStop;
    if (status.code == etcd::Errc::kCompacted) {
        log_event("etcd revision compacted",
                  {{"call", call}, {"compactRevision", status.compact_revision}, {"message", status.message}});
        return Next::kRebuild;
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
