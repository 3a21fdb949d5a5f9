// A client of etcd 3.4's v3 JSON gateway over libcurl, for keyauthd,
// keyauthctl and keyauth-syncd: unary calls (range, paged range pinned at one
// revision, put, delete, txn, status, compaction, lease grant, keep-alive and
// revoke) and the streaming watch, over a list of endpoints with failover.
// The wire format is etcd_codec's.
//
// Guarantees (docs/scale-out.md, "etcd client", says the same for operators):
//   - Deadlines: a unary call returns within its request timeout (5 s by
//     default), whatever the members do; so does establishing a watch.
//   - Failover: a call tries the endpoints in list order, starting with the
//     one that last answered, each at most once; an endpoint that fails is
//     passed over for the next. What remains of the deadline is shared among
//     the endpoints not yet tried, so one silent (stopped, isolated) member
//     cannot eat it all. Connection errors, timeouts and HTTP 5xx fail over;
//     an answer (a 4xx or a 200) does not.
//   - Errors are typed (Errc) so that a caller can tell "try again later"
//     (kUnavailable, kNoLeader) from "start over" (kCompacted) from a bug or
//     a broken peer (kRejected, kBadAnswer).
//   - A write that timed out may or may not have been applied, as with any
//     etcd client: the etcd backend guards every txn with compares, so a
//     replay cannot apply twice.
//
// Thread-safety: one Client serves one thread at a time (keep one per
// thread); only cancel() may be called from another thread, at any time
// while the Client exists. Nothing throws out of a call except what a
// caller's own callback throws (passed on once the transfer is torn down)
// and std::bad_alloc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "etcd_codec.h"

namespace keyauth::etcd {

enum class Errc {
    kOk,
    kUnavailable,  // no endpoint answered in time (refused, reset, silent, 5xx)
    kNoLeader,     // the member answered but has no leader (partitioned or electing)
    kCompacted,    // the revision asked for is gone: read again from a snapshot
    kBadAnswer,    // an answer that is not etcd's (unparsable, too large, odd status)
    kRejected,     // etcd refused the request itself (4xx): retrying will not help
    kCanceled,     // cancel() or the caller's stop flag
    kLeaseNotFound,  // the lease named (a put's, a txn's, a revoke's) expired or was revoked
};

const char *errc_name(Errc code);

struct Status {
    Errc code = Errc::kOk;
    std::string message;  // what went wrong, naming the endpoint(s)
    // kCompacted from a watch: etcd's compact revision (the oldest revision
    // still readable is the one after it). 0 otherwise.
    int64_t compact_revision = 0;

    bool ok() const { return code == Errc::kOk; }
    // kUnavailable and kNoLeader: the same call may succeed later.
    bool retryable() const { return code == Errc::kUnavailable || code == Errc::kNoLeader; }
};

struct ClientOptions {
    std::vector<std::string> endpoints;  // "http://127.0.0.1:2379", "https://etcd1:2379"
    // TLS, handed to curl as they are: CA bundle to verify members with, and
    // a client certificate and key for members that require one.
    std::string ca_file;
    std::string cert_file;
    std::string key_file;
    std::chrono::milliseconds request_timeout{5000};
    std::size_t max_answer_bytes = kMaxAnswerBytes;  // an answer or a watch line
};

// "http://a:2379,https://b:2379" → endpoints; false with a reason for an
// empty list or an entry that is not http(s)://host[:port] (no path).
bool parse_endpoints(std::string_view list, std::vector<std::string> &out, std::string &error);

struct WatchOptions {
    // A stream that sends nothing (no event, no progress notification) for
    // this long is given up with kUnavailable: a stopped or cut-off member
    // looks exactly like this. Keep it above the cluster's progress-notify
    // interval (1 s with the settings in docs/scale-out.md). 0: never.
    std::chrono::milliseconds silence_timeout{5000};
    // Set by the caller (any thread) to end the watch with kCanceled,
    // noticed within about 100 ms.
    const std::atomic<bool> *stop = nullptr;
};

// Called with each result of a watch: the `created` one, events, and
// progress notifications. Returning false ends the watch (Status kOk).
using WatchCallback = std::function<bool(const WatchResponse &)>;
// Called with each page of range_all; returning false stops the read (kOk).
using PageCallback = std::function<bool(const RangeResponse &)>;

class Client {
public:
    // nullptr with a reason when the options are unusable (no endpoint, a
    // malformed one, a zero timeout) or libcurl cannot start.
    static std::unique_ptr<Client> make(ClientOptions options, std::string &error);
    ~Client();
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;

    Status range(const RangeRequest &request, RangeResponse &out);
    // Every key of the request's range at one revision, `page_size` keys a
    // call: the first page fixes the revision (the request's own, or the
    // newest), the next pages read at it, so the pages together are one
    // snapshot however many writes happen meanwhile. kCompacted if that
    // revision is compacted before the last page. Each page has its own
    // deadline. `revision`, when given, receives the revision read at.
    Status range_all(const RangeRequest &request, int64_t page_size, const PageCallback &on_page,
                     int64_t *revision = nullptr);
    Status put(const PutRequest &request, PutResponse &out);
    Status delete_range(const DeleteRangeRequest &request, DeleteRangeResponse &out);
    Status txn(const TxnRequest &request, TxnResponse &out);
    // The member's status; its header carries the cluster_id.
    Status status(StatusResponse &out);
    // Discards history up to `revision` (tests; the cluster compacts itself).
    Status compact(int64_t revision, bool physical, CompactionResponse &out);

    // A new lease (etcd_leader.h uses these).
    Status lease_grant(const LeaseGrantRequest &request, LeaseGrantResponse &out);
    // Renews the lease once, as a unary call with the same deadline and
    // failover: the gateway's keep-alive is a stream, and this sends one
    // request on it and reads the first answer line (etcd then closes the
    // stream; the call does not wait for that). out.ttl_seconds 0 (with kOk)
    // says the lease no longer exists. A stream error line is typed as a
    // unary error would be (e.g. kNoLeader) and fails over.
    Status lease_keepalive(int64_t id, LeaseKeepAliveResponse &out);
    // Ends the lease and deletes its keys; kLeaseNotFound if it is gone already.
    Status lease_revoke(int64_t id, LeaseRevokeResponse &out);

    // Watches the request's range. Tries the endpoints like a unary call until
    // one sends `created` within the request timeout; then streams from that
    // member until the stream ends (kUnavailable), the member loses its
    // leader (kNoLeader: the watch asks to be ended rather than be served a
    // frozen view), the start revision was compacted (kCompacted, with
    // compact_revision), the stream stays silent past silence_timeout
    // (kUnavailable), `on_result` returns false (kOk), or cancel()/the stop
    // flag (kCanceled). It never resumes by itself: the caller watches again
    // from the revision after the last one it applied, and the next watch
    // starts at the next endpoint if this one failed.
    Status watch(const WatchCreateRequest &request, const WatchOptions &options,
                 const WatchCallback &on_result);

    // From any thread: the running call and every later one end with
    // kCanceled (for shutting down). Wakes a waiting call at once.
    void cancel();

    // The endpoint the next call tries first.
    const std::string &preferred_endpoint() const;
    // TCP connections opened so far: keep-alive makes it one per member
    // reached, plus one per watch and per connection a failure closed.
    uint64_t connections_opened() const;

private:
    struct Impl;
    explicit Client(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace keyauth::etcd
