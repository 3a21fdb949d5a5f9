#include "snapshot_copy.h"

#include <fcntl.h>
#include <lmdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "keyauth_schema.h"
#include "le.h"

namespace keyauth::syncd {
namespace {

constexpr std::string_view kHeadWord = "keyauth-snapshot";

bool write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

// The environment, its writer lock and the mark, released in that order.
struct Env {
    MDB_env *env = nullptr;
    MDB_txn *writer = nullptr;
    ~Env() {
        if (writer) mdb_txn_abort(writer);
        if (env) mdb_env_close(env);
    }
};

int lmdb_failed(std::string &error, const char *what, int rc) {
    error = std::string(what) + ": " + mdb_strerror(rc);
    return 1;
}

std::optional<uint64_t> meta_u64(MDB_txn *txn, MDB_dbi meta, const char *name, size_t size) {
    MDB_val k{std::strlen(name), const_cast<char *>(name)}, v;
    if (mdb_get(txn, meta, &k, &v) != 0 || v.mv_size != size) return std::nullopt;
    const auto *p = static_cast<const unsigned char *>(v.mv_data);
    return size == 8 ? load_le<uint64_t>(p) : load_le<uint32_t>(p);
}

}  // namespace

std::string snapshot_head_line(const SnapshotHead &head) {
    return std::string(kHeadWord) + " " + std::to_string(head.revision) + " " + std::to_string(head.cluster_id) +
           " " + std::to_string(head.schema_version) + "\n";
}

std::optional<SnapshotHead> parse_snapshot_head(std::string_view line) {
    std::vector<std::string_view> words;  // every one, empty ones too
    for (size_t at = 0;;) {
        const size_t sp = line.find(' ', at);
        words.push_back(line.substr(at, sp == std::string_view::npos ? std::string_view::npos : sp - at));
        if (sp == std::string_view::npos || words.size() > 4) break;
        at = sp + 1;
    }
    if (words.size() != 4 || words[0] != kHeadWord) return std::nullopt;
    const auto revision = parse_decimal<int64_t>(words[1]);
    const auto cluster = parse_decimal<uint64_t>(words[2]);
    const auto schema = parse_decimal<uint32_t>(words[3]);
    if (!revision || *revision < 0 || !cluster || !schema) return std::nullopt;
    SnapshotHead h{*revision, *cluster, *schema};
    return h;
}

void widen_pipe(int fd) noexcept { (void)::fcntl(fd, F_SETPIPE_SZ, 1 << 20); }

int write_snapshot_copy(const std::string &dir, int out_fd, std::string &error) {
    signal(SIGPIPE, SIG_IGN);  // a reader gone is an error of write(), not a signal
    struct stat st;
    if (::stat((dir + "/data.mdb").c_str(), &st) != 0) {  // never make a store here
        error = "no store at " + dir;
        return 1;
    }
    Env e;
    if (int rc = mdb_env_create(&e.env); rc != 0) return lmdb_failed(error, "mdb_env_create", rc);
    mdb_env_set_maxdbs(e.env, 64);
    if (int rc = mdb_env_open(e.env, dir.c_str(), 0, 0); rc != 0) return lmdb_failed(error, "mdb_env_open", rc);
    int rc = mdb_txn_begin(e.env, nullptr, 0, &e.writer);
    if (rc == MDB_MAP_RESIZED) {  // syncd grew the map since this process opened it
        mdb_env_set_mapsize(e.env, 0);
        rc = mdb_txn_begin(e.env, nullptr, 0, &e.writer);
    }
    if (rc != 0) return lmdb_failed(error, "mdb_txn_begin", rc);
    MDB_dbi meta;
    if (rc = mdb_dbi_open(e.writer, KA_DB_META, 0, &meta); rc != 0) return lmdb_failed(error, "the meta table", rc);
    const auto revision = meta_u64(e.writer, meta, KA_META_SYNCD_REVISION, 8);
    const auto cluster = meta_u64(e.writer, meta, KA_META_CLUSTER_ID, 8);
    const auto schema = meta_u64(e.writer, meta, KA_META_SCHEMA_VERSION, 4);
    if (!revision || !cluster || !schema || *revision > static_cast<uint64_t>(INT64_MAX)) {
        error = "the store at " + dir + " holds no complete mirror of etcd";
        return 1;
    }
    const SnapshotHead head{static_cast<int64_t>(*revision), *cluster, static_cast<uint32_t>(*schema)};

    int pipe_fds[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        error = std::string("pipe: ") + std::strerror(errno);
        return 1;
    }
    widen_pipe(pipe_fds[1]);
    int copy_rc = 0;
    std::thread copier([&] {
        copy_rc = mdb_env_copyfd2(e.env, pipe_fds[1], MDB_CP_COMPACT);
        ::close(pipe_fds[1]);
    });
    // The copy's read transaction has begun once it writes (or ends): until
    // then this process holds the writer lock, so the copy sees the mark.
    pollfd p{pipe_fds[0], POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    mdb_txn_abort(e.writer);
    e.writer = nullptr;

    const std::string line = snapshot_head_line(head);
    bool ok = write_all(out_fd, line.data(), line.size());
    std::vector<char> buf(1 << 20);
    while (ok) {
        ssize_t n = ::read(pipe_fds[0], buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ok = n == 0;
            break;
        }
        ok = write_all(out_fd, buf.data(), static_cast<size_t>(n));
    }
    if (!ok && error.empty()) error = std::string("cannot write the copy: ") + std::strerror(errno);
    ::close(pipe_fds[0]);  // a copy still writing fails at once
    copier.join();
    if (ok && copy_rc != 0) return lmdb_failed(error, "mdb_env_copyfd2", copy_rc);
    return ok ? 0 : 1;
}

}  // namespace keyauth::syncd
