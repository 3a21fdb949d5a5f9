#include "etcd_sink.h"

#include <algorithm>
#include <utility>

namespace keyauth::etcd {

void Sink::end(Errc code, std::string message, int64_t compact_revision) {
    ended = true;
    end_status = Status{code, std::move(message), compact_revision};
}

bool Sink::deliver(std::string_view line, bool more_at_hand) {
    WatchLine w;
    std::string error;
    if (!parse_watch_line(line, w, error)) {
        end(Errc::kBadAnswer, "watch stream: " + error);
        return false;
    }
    if (w.is_error) {
        end(w.error.is_no_leader() ? Errc::kNoLeader : Errc::kUnavailable, "watch stream ended: " + w.error.message);
        return false;
    }
    if (w.result.canceled) {
        if (w.result.compact_revision > 0) {
            end(Errc::kCompacted,
                "watch start revision compacted (compact revision " + std::to_string(w.result.compact_revision) +
                    ")",
                w.result.compact_revision);
        } else {
            end(Errc::kRejected, "watch canceled by etcd: " + w.result.cancel_reason);
        }
        return false;
    }
    established = true;
    w.result.more_at_hand = more_at_hand;
    try {
        if (!(*on_result)(w.result)) {
            end(Errc::kOk, "stopped by the callback");
            return false;
        }
    } catch (...) {
        // never through libcurl's C frames: kept, and rethrown by watch()
        thrown = std::current_exception();
        return false;
    }
    return true;
}

std::optional<std::string_view> Sink::next_line(std::size_t &from) const {
    for (;;) {
        std::size_t nl = body.find('\n', std::max(from, scanned));
        if (nl == std::string::npos) return std::nullopt;
        std::string_view line(body.data() + from, nl - from);
        from = nl + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.empty()) return line;
    }
}

bool Sink::split_lines() {
    std::size_t start = 0;
    std::optional<std::string_view> line = next_line(start);
    while (line) {
        std::optional<std::string_view> after = next_line(start);
        if (!deliver(*line, after.has_value())) return false;
        line = after;
    }
    body.erase(0, start);
    scanned = body.size();
    return true;
}

size_t on_data(char *data, size_t size, size_t count, void *user) {
    auto *sink = static_cast<Sink *>(user);
    size_t n = size * count;
    sink->last_data = std::chrono::steady_clock::now();
    if (sink->http == 0) curl_easy_getinfo(sink->easy, CURLINFO_RESPONSE_CODE, &sink->http);
    if (sink->body.size() + n > sink->limit) {
        sink->too_large = true;
        return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    try {
        sink->body.append(data, n);
        return n;
    } catch (...) {  // bad_alloc
        sink->thrown = std::current_exception();
        return 0;
    }
}

}  // namespace keyauth::etcd
