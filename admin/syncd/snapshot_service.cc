#include "snapshot_service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "ip_allowlist.h"
#include "sha256_stream.h"
#include "snapshot_copy.h"
#include "syncd_log.h"

extern char **environ;

namespace keyauth::syncd {
namespace {

// How long the copy process may be silent: its head waits for the writer
// lock (one batch of syncd's), each piece for LMDB's walk of the tree.
constexpr int kCopySilenceMs = 60'000;
constexpr size_t kPieceBytes = 1 << 20;  // a chunk on the wire: a pipe's worth (widen_pipe)
constexpr size_t kHeadMax = 128;

// One copy in progress: the process making it, what was read of it, and
// the one-at-a-time flag, released (and the process killed if it still
// runs) however the answer ends.
struct Copy {
    Copy(std::atomic<bool> &busy, Metrics &metrics) : busy(busy), metrics(metrics) {}
    ~Copy() {
        if (fd >= 0) ::close(fd);  // a copy still writing fails at once
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            int status;
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
        }
        if (sending && whole) {
            metrics.add_snapshot_served();
            log_event("snapshot sent", {{"peer", peer}, {"bytes", bytes}});
        } else if (sending) {
            metrics.add_snapshot_failed();
            log_event("snapshot cut short",
                      {{"peer", peer}, {"bytes", bytes}, {"reason", why.empty() ? "the client stalled or left" : why}});
        }
        busy.store(false);
    }

    // Up to `max` bytes, waiting at most kCopySilenceMs; 0 at the end.
    size_t read_some(char *into, size_t max) {
        pollfd p{fd, POLLIN, 0};
        int rc;
        while ((rc = ::poll(&p, 1, kCopySilenceMs)) < 0 && errno == EINTR) {
        }
        if (rc == 0) throw std::runtime_error("the copy process was silent for 60 s");
        ssize_t n;
        while ((n = ::read(fd, into, max)) < 0 && errno == EINTR) {
        }
        if (n < 0) throw std::runtime_error(std::string("reading the copy: ") + std::strerror(errno));
        return static_cast<size_t>(n);
    }

    // Whether the copy process ended well (it is reaped either way).
    bool ended_well() {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        pid = 0;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }

    std::atomic<bool> &busy;
    Metrics &metrics;
    pid_t pid = 0;
    int fd = -1;
    Sha256Stream sha;
    uint64_t bytes = 0;
    bool sending = false;  // the head is out: the copy is served or cut short
    bool whole = false;
    std::string peer;
    std::string why;
};

HttpResponse with_retry_after(HttpResponse r, const char *seconds) {
    r.headers.emplace_back("Retry-After", seconds);
    return r;
}

}  // namespace

SnapshotService::SnapshotService(std::string db, std::string prefix, std::string allowed, std::string program,
                                 Metrics &metrics)
    : db_(std::move(db)),
      prefix_(std::move(prefix)),
      allowed_(std::move(allowed)),
      program_(std::move(program)),
      metrics_(metrics) {}

HttpResponse SnapshotService::handle(const HttpRequest &request) noexcept {
    try {
        unsigned char peer[kCidrEntryBytes];
        if (parse_cidr(request.client_address, peer) != CidrParse::kOk || !allowed_ips_fit(allowed_, peer)) {
            metrics_.add_snapshot_refusal(Metrics::SnapshotRefusal::kForbidden);
            return json_error(403, "FORBIDDEN", "this address may not fetch snapshots (--snapshot-allow)");
        }
        if (request.path != "/snapshot") return json_error(404, "NOT_FOUND", "no such path: /snapshot only");
        if (request.method != "GET") {
            HttpResponse r = json_error(405, "METHOD_NOT_ALLOWED", "GET only");
            r.headers.emplace_back("Allow", "GET");
            return r;
        }
        std::string why;
        if (const char *code = metrics_.unhealthy(why)) {
            metrics_.add_snapshot_refusal(Metrics::SnapshotRefusal::kNotReady);
            return with_retry_after(json_error(503, "NOT_READY", std::string(code) + ": " + why), "5");
        }
        bool expected = false;
        if (!busy_.compare_exchange_strong(expected, true)) {
            metrics_.add_snapshot_refusal(Metrics::SnapshotRefusal::kBusy);
            return with_retry_after(json_error(429, "SNAPSHOT_BUSY", "another copy is being sent; one at a time"),
                                    "5");
        }
        return start_copy(request.client_address);
    } catch (...) {  // std::bad_alloc, a copy that could not start
        HttpResponse r;
        r.status = 500;
        return r;
    }
}

HttpResponse SnapshotService::start_copy(const std::string &peer) {
    auto copy = std::make_shared<Copy>(busy_, metrics_);  // from here on, it releases busy_
    copy->peer = peer;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    widen_pipe(fds[0]);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string flag = "--snapshot-copy";
    char *argv[] = {program_.data(), flag.data(), db_.data(), nullptr};
    const int rc = ::posix_spawn(&copy->pid, program_.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    copy->fd = fds[0];
    if (rc != 0) {
        copy->pid = 0;
        log_event("snapshot copy not started", {{"program", program_}, {"error", std::strerror(rc)}});
        return json_error(500, "INTERNAL", "the copy could not be started");
    }

    // The head line, and what came after it: the copy's first bytes.
    std::string got;
    size_t eol;
    while ((eol = got.find('\n')) == std::string::npos && got.size() <= kHeadMax) {
        char buf[kHeadMax + 1];
        const size_t n = copy->read_some(buf, sizeof buf);
        if (n == 0) break;
        got.append(buf, n);
    }
    std::optional<SnapshotHead> head;
    if (eol != std::string::npos) head = parse_snapshot_head(std::string_view(got).substr(0, eol));
    if (!head) {  // the process said why on syncd's log: no store, no mark
        metrics_.add_snapshot_refusal(Metrics::SnapshotRefusal::kNotReady);
        return with_retry_after(json_error(503, "NOT_READY", "this edge cannot copy its store now"), "5");
    }

    HttpResponse r;
    r.content_type = "application/octet-stream";
    r.headers = {{kRevisionField, std::to_string(head->revision)},
                 {kClusterField, std::to_string(head->cluster_id)},
                 {kSchemaField, std::to_string(head->schema_version)},
                 {kPrefixField, prefix_},
                 {"Trailer", kChecksumField},
                 {"Cache-Control", "no-store"}};
    r.body = got.substr(eol + 1);
    copy->sha.add(r.body);
    copy->bytes = r.body.size();
    r.stream = [copy](std::string &piece) {
        // whole pieces: each is a hand-over to the server's thread and a write
        piece.resize(kPieceBytes);
        size_t n = 0;
        for (size_t got; n < piece.size() && (got = copy->read_some(piece.data() + n, piece.size() - n)) > 0;) {
            n += got;
        }
        piece.resize(n);
        if (n > 0) {
            copy->sha.add(piece);
            copy->bytes += n;
            return true;
        }
        if (!copy->ended_well()) {
            copy->why = "the copy process failed";
            throw std::runtime_error(copy->why);
        }
        return false;
    };
    r.trailer = [copy]() -> std::vector<std::pair<std::string, std::string>> {
        copy->whole = true;  // the last piece is made: what is left is the server's to send
        return {{kChecksumField, copy->sha.hex()}};
    };
    copy->sending = true;
    log_event("snapshot started", {{"peer", peer}, {"revision", head->revision}, {"clusterId", head->cluster_id}});
    return r;
}

}  // namespace keyauth::syncd
