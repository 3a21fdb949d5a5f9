// The copy GET /snapshot serves (snapshot_service.h): LMDB's compacting
// copy of an edge's store, made by a process of its own
// (`keyauth-syncd --snapshot-copy DIR`), so that syncd's own environment is
// never remapped or swapped under a copy in progress, and a copy that is cut
// short is ended by killing that process.
//
// What the process writes to its standard output: one head line, then the
// copy (a data.mdb) to the end.
//
//   keyauth-snapshot <revision> <cluster id> <schema version>\n
//
// The head is the copy's own mark: the copy's read transaction is begun
// while this process holds the store's writer lock, so no commit falls
// between the mark read and the copy.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keyauth::syncd {

struct SnapshotHead {
    int64_t revision = 0;
    uint64_t cluster_id = 0;
    uint32_t schema_version = 0;
};

// A whole decimal number of type T, nothing else (no sign, no space): the
// head line's fields, and the same fields as GET /snapshot's head sends them.
template <typename T>
std::optional<T> parse_decimal(std::string_view s) {
    T v{};
    if (s.empty() || s.size() > 20) return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

// The head line for `head`, with its newline.
std::string snapshot_head_line(const SnapshotHead &head);
// A head line (without its newline); none unless it is exactly one.
std::optional<SnapshotHead> parse_snapshot_head(std::string_view line);

// Writes the head and the copy of the store at `dir` to `out_fd`. Returns 0,
// or 1 with `error` set: no store there, a store without a mirror mark (not
// one syncd completed), an LMDB error, a write that failed.
int write_snapshot_copy(const std::string &dir, int out_fd, std::string &error);

// Asks for a pipe of 1 MiB (Linux's default pipe-max-size) instead of 64 KiB,
// so that the copy moves in LMDB's own 1 MiB writes (a 139 MB bootstrap: 0.5-0.7 s
// in 64 KiB pieces, 0.35 s in 1 MiB ones). Best effort: a smaller pipe only
// moves the copy in smaller pieces.
void widen_pipe(int fd) noexcept;

}  // namespace keyauth::syncd
