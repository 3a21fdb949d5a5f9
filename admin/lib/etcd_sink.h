// What libcurl hands over for one etcd call (etcd_client.cc): the body of a
// unary answer, or a watch stream split into answers and passed to the
// caller's callback. Internal to the client.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "etcd_client.h"

namespace keyauth::etcd {

// One transfer's data. A watch's lines are passed on after each turn of
// libcurl (split_lines), not as each arrives: one read of the socket holds
// many answers of a stream that fell behind (each answer is an HTTP chunk,
// written to on_data alone), and each answer but the turn's last is marked
// as having more at hand.
struct Sink {
    CURL *easy = nullptr;
    std::size_t limit = 0;
    std::string body;         // a unary answer; a watch's unread lines or error body
    std::size_t scanned = 0;  // body[0, scanned) holds no '\n'
    bool too_large = false;
    long http = 0;
    std::chrono::steady_clock::time_point last_data = std::chrono::steady_clock::now();

    // the watch's
    const WatchCallback *on_result = nullptr;
    bool established = false;  // a result reached the caller: no silent failover
    bool ended = false;        // the stream said how the watch ends: end_status
    Status end_status;
    std::exception_ptr thrown;

    void end(Errc code, std::string message, int64_t compact_revision = 0);
    // One line of the stream to the caller; false ends the transfer (ended
    // or thrown says why).
    bool deliver(std::string_view line, bool more_at_hand = false);
    // Every whole line in body, in order; false as deliver.
    bool split_lines();

private:
    // The next line at or after `from` that is whole and not empty, if any.
    std::optional<std::string_view> next_line(std::size_t &from) const;
};

// libcurl's CURLOPT_WRITEFUNCTION, with the Sink as CURLOPT_WRITEDATA.
size_t on_data(char *data, size_t size, size_t count, void *user);

}  // namespace keyauth::etcd
