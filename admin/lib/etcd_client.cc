#include "etcd_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "curl_global.h"
#include "etcd_sink.h"

namespace keyauth::etcd {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char *errc_name(Errc code) {
    switch (code) {
    case Errc::kOk: return "ok";
    case Errc::kUnavailable: return "unavailable";
    case Errc::kNoLeader: return "no leader";
    case Errc::kCompacted: return "compacted";
    case Errc::kBadAnswer: return "bad answer";
    case Errc::kRejected: return "rejected";
    case Errc::kCanceled: return "canceled";
    case Errc::kLeaseNotFound: return "lease not found";
    }
    return "unknown";
}

// ---- endpoints ----------------------------------------------------------

namespace {

// http(s)://host[:port], host a name, an IPv4 address or [an IPv6 one].
// Anything else (a path, credentials, a query) is refused rather than
// guessed at: the gateway's paths are appended to it.
bool valid_endpoint(std::string_view e, std::string &error) {
    std::string_view rest;
    if (e.substr(0, 7) == "http://") {
        rest = e.substr(7);
    } else if (e.substr(0, 8) == "https://") {
        rest = e.substr(8);
    } else {
        error = "etcd endpoint '" + std::string(e) + "' is not http:// or https://";
        return false;
    }
    std::string_view host = rest, port;
    if (!rest.empty() && rest.front() == '[') {
        size_t close = rest.find(']');
        if (close == std::string_view::npos) host = {};
        else {
            host = rest.substr(0, close + 1);
            std::string_view after = rest.substr(close + 1);
            if (!after.empty() && after.front() != ':') host = {};
            port = after.empty() ? after : after.substr(1);
            if (!after.empty() && port.empty()) host = {};
        }
    } else if (size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
        if (port.empty()) host = {};
    }
    bool ok = !host.empty();
    for (char c : host) {
        bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '-' || c == '_' || c == '[' || c == ']' || c == ':';
        if (!allowed) ok = false;
    }
    if (ok && host.front() != '[' && host.find_first_of("[]:") != std::string_view::npos) ok = false;
    if (!port.empty()) {
        if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
            ok = false;
        } else if (int p = std::stoi(std::string(port)); p < 1 || p > 65535) {
            ok = false;
        }
    }
    if (!ok) error = "etcd endpoint '" + std::string(e) + "' is not scheme://host[:port]";
    return ok;
}

}  // namespace

bool parse_endpoints(std::string_view list, std::vector<std::string> &out, std::string &error) {
    out.clear();
    size_t start = 0;
    while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string_view::npos) comma = list.size();
        std::string_view e = list.substr(start, comma - start);
        if (!e.empty() && e.back() == '/') e.remove_suffix(1);
        if (e.empty()) {
            error = "empty etcd endpoint in '" + std::string(list) + "'";
            return false;
        }
        if (!valid_endpoint(e, error)) return false;
        out.emplace_back(e);
        start = comma + 1;
    }
    return true;
}

// ---- the transfer machinery ------------------------------------------

namespace {

// How often a waiting call looks at the caller's stop flag. cancel() does
// not wait for it: it wakes the wait at once.
constexpr milliseconds kPollSlice{100};
constexpr long kReadBufferBytes = 512 * 1024;

long ms_of(Clock::duration d) {
    return static_cast<long>(std::chrono::duration_cast<milliseconds>(d).count());
}

enum class Outcome { kFinished, kDeadline, kCanceled };

struct Run {
    Outcome outcome = Outcome::kFinished;
    CURLcode code = CURLE_OK;
};

}  // namespace

struct Client::Impl {
    ClientOptions options;
    CURLM *multi = nullptr;
    // One easy handle per endpoint, reused call after call: with the multi
    // handle's connection cache, that keeps one connection per member alive.
    std::vector<CURL *> easy;
    curl_slist *headers = nullptr;
    std::size_t preferred = 0;
    uint64_t connects = 0;
    std::atomic<bool> canceled{false};

    ~Impl() {
        for (CURL *e : easy) curl_easy_cleanup(e);
        if (multi != nullptr) curl_multi_cleanup(multi);
        curl_slist_free_all(headers);
    }

    bool start(std::string &error) {
        if (!curl_global_ready()) {
            error = "libcurl could not be initialised";
            return false;
        }
        multi = curl_multi_init();
        // JSON in and out; no "Expect: 100-continue" round trip for larger
        // bodies; and a member without a leader refuses at once rather than
        // time out (a call) or serve a view that no longer moves (a watch).
        for (const char *h : {"Content-Type: application/json", "Expect:",
                              "Grpc-Metadata-hasleader: true"}) {
            curl_slist *more = curl_slist_append(headers, h);
            if (more == nullptr) break;
            headers = more;
        }
        if (multi == nullptr || headers == nullptr) {
            error = "libcurl could not allocate a handle";
            return false;
        }
        for (std::size_t i = 0; i < options.endpoints.size(); ++i) {
            CURL *e = curl_easy_init();
            if (e == nullptr) {
                error = "libcurl could not allocate a handle";
                return false;
            }
            easy.push_back(e);
            curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM
            curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
            curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
            curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
            curl_easy_setopt(e, CURLOPT_POST, 1L);
            curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
            curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
            if (!options.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options.ca_file.c_str());
            if (!options.cert_file.empty()) {
                curl_easy_setopt(e, CURLOPT_SSLCERT, options.cert_file.c_str());
            }
            if (!options.key_file.empty()) curl_easy_setopt(e, CURLOPT_SSLKEY, options.key_file.c_str());
        }
        return true;
    }

    // One transfer on the multi handle until it finishes, `deadline()` (read
    // again each turn: a watch's moves with its data) passes, a cancel, or
    // `after_turn()` (called after each turn that did not finish it) says
    // to end it.
    template <typename Deadline, typename AfterTurn>
    Run drive(CURL *e, const std::atomic<bool> *stop, Deadline deadline, AfterTurn after_turn) {
        Run run;
        if (curl_multi_add_handle(multi, e) != CURLM_OK) {
            run.code = CURLE_FAILED_INIT;
            return run;
        }
        for (;;) {
            int running = 0;
            CURLMcode mc = curl_multi_perform(multi, &running);
            bool finished = false;
            int queued = 0;
            while (CURLMsg *msg = curl_multi_info_read(multi, &queued)) {
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == e) {
                    finished = true;
                    run.code = msg->data.result;
                }
            }
            if (finished) break;
            if (mc != CURLM_OK) {
                run.code = CURLE_FAILED_INIT;
                break;
            }
            if (!after_turn()) {
                run.outcome = Outcome::kCanceled;
                break;
            }
            if (canceled.load() || (stop != nullptr && stop->load())) {
                run.outcome = Outcome::kCanceled;
                break;
            }
            Clock::time_point now = Clock::now(), until = deadline();
            if (now >= until) {
                run.outcome = Outcome::kDeadline;
                break;
            }
            auto wait = std::min<Clock::duration>(until - now, kPollSlice);
            curl_multi_poll(multi, nullptr, 0, std::max(1L, ms_of(wait)), nullptr);
        }
        long opened = 0;
        if (curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &opened) == CURLE_OK && opened > 0) {
            connects += static_cast<uint64_t>(opened);
        }
        // an unfinished transfer's connection is closed, never reused
        curl_multi_remove_handle(multi, e);
        return run;
    }

    void prepare(CURL *e, const std::string &url, const std::string &body, Sink &sink) {
        sink.easy = e;
        sink.limit = options.max_answer_bytes;
        curl_easy_setopt(e, CURLOPT_URL, url.c_str());
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());  // not copied: body outlives the transfer
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &sink);
        // whatever the socket holds in one read (libcurl's default is 16 KiB):
        // a watch that fell behind gets many answers at hand at once
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, kReadBufferBytes);
    }

    // One try on one endpoint: its outcome, and whether the call goes on to
    // the next endpoint.
    struct Attempt {
        Status status;
        bool fail_over = false;
    };

    // An answer other than 200: the gateway's error body says which.
    static Attempt classify_http(long http, const std::string &body, const std::string &where) {
        GatewayError ge;
        std::string error;
        bool parsed = parse_gateway_error(body, ge, error);
        std::string what = where + ": HTTP " + std::to_string(http) +
                           (parsed ? ", " + ge.message : std::string());
        if (http >= 500 && http <= 599) {
            return {{parsed && ge.is_no_leader() ? Errc::kNoLeader : Errc::kUnavailable, what}, true};
        }
        if (http >= 400 && http <= 499 && parsed) {
            Errc code = ge.is_compacted()        ? Errc::kCompacted
                        : ge.is_lease_not_found() ? Errc::kLeaseNotFound
                                                  : Errc::kRejected;
            return {{code, what}, false};
        }
        return {{Errc::kBadAnswer, what + (parsed ? "" : " (not an etcd answer)")}, false};
    }

    static Attempt transport_failure(const Run &run, const Sink &sink, long budget_ms,
                                     const std::string &where) {
        if (run.outcome == Outcome::kCanceled) return {{Errc::kCanceled, where + ": canceled"}, false};
        if (run.outcome == Outcome::kDeadline) {
            return {{Errc::kUnavailable, where + ": no answer within " + std::to_string(budget_ms) + " ms"},
                    true};
        }
        if (sink.too_large) {
            return {{Errc::kBadAnswer,
                     where + ": answer over " + std::to_string(sink.limit) + " bytes"},
                    false};
        }
        return {{Errc::kUnavailable, where + ": " + curl_easy_strerror(run.code)}, true};
    }

    // `first_line`: the answer is a stream (a keep-alive's) whose first
    // line is all the call wants: the transfer ends there, whether or not
    // the server has closed the stream yet.
    Attempt unary_once(std::size_t index, const char *path, const std::string &body,
                       Clock::time_point deadline, long budget_ms, std::string &answer,
                       bool first_line = false) {
        const std::string &where = options.endpoints[index];
        std::string url = where + path;
        Sink sink;
        prepare(easy[index], url, body, sink);
        auto line_at_hand = [&] { return first_line && sink.body.find('\n') != std::string::npos; };
        Run run = drive(easy[index], nullptr, [deadline] { return deadline; },
                        [&] { return !line_at_hand(); });
        if (sink.thrown) std::rethrow_exception(sink.thrown);  // bad_alloc only
        const bool ended_at_line = run.outcome == Outcome::kCanceled && line_at_hand();
        if (!ended_at_line && (run.outcome != Outcome::kFinished || run.code != CURLE_OK)) {
            return transport_failure(run, sink, budget_ms, where);
        }
        curl_easy_getinfo(easy[index], CURLINFO_RESPONSE_CODE, &sink.http);
        if (sink.http != 200) return classify_http(sink.http, sink.body, where);
        answer = std::move(sink.body);
        return {{Errc::kOk, where}, false};
    }

    // The endpoints in failover order, each tried once within one deadline.
    // `attempt(index, attempt_deadline, budget_ms)` returns an Attempt.
    template <typename Try>
    Status over_endpoints(Try attempt) {
        if (canceled.load()) return {Errc::kCanceled, "canceled"};
        const std::size_t n = options.endpoints.size();
        const Clock::time_point deadline = Clock::now() + options.request_timeout;
        const std::size_t first = preferred;
        std::string failures;
        Errc last = Errc::kUnavailable;
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t index = (first + i) % n;
            Clock::time_point now = Clock::now();
            if (now >= deadline) break;
            // the rest of the deadline, shared with the endpoints still untried
            Clock::duration share = (deadline - now) / static_cast<long>(n - i);
            Attempt a = attempt(index, now + share, std::max(1L, ms_of(share)));
            if (a.status.ok() || !a.fail_over) {
                if (a.status.ok()) preferred = index;
                return a.status;
            }
            preferred = (index + 1) % n;
            last = a.status.code;
            failures += (failures.empty() ? "" : "; ") + a.status.message;
        }
        return {last, "no etcd endpoint answered within " +
                          std::to_string(options.request_timeout.count()) + " ms (" + failures + ")"};
    }

    Status unary(const char *path, const std::string &body, std::string &answer) {
        return over_endpoints([&](std::size_t index, Clock::time_point until, long budget_ms) {
            return unary_once(index, path, body, until, budget_ms, answer);
        });
    }

    template <typename Answer, typename Parse>
    Status call(const char *path, const std::string &body, Answer &out, Parse parse) {
        std::string answer;
        Status s = unary(path, body, answer);
        if (!s.ok()) return s;
        std::string error;
        if (!parse(answer, out, error)) return {Errc::kBadAnswer, s.message + ": " + error};
        return {};
    }

    // The first line of a keep-alive stream, typed like a unary answer.
    static Attempt read_keepalive(const std::string &answer, int64_t id,
                                  LeaseKeepAliveResponse &out, const std::string &where) {
        std::string_view line(answer);
        line = line.substr(0, line.find('\n'));
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) return {{Errc::kBadAnswer, where + ": keep-alive stream ended without an answer"}, false};
        LeaseKeepAliveLine parsed;
        std::string error;
        if (!parse_lease_keepalive_line(line, parsed, error)) {
            return {{Errc::kBadAnswer, where + ": " + error}, false};
        }
        if (parsed.is_error) {
            const GatewayError &ge = parsed.error;
            // 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED: this member cannot renew now
            Errc code = ge.is_no_leader()                              ? Errc::kNoLeader
                        : ge.grpc_code == 14 || ge.grpc_code == 4      ? Errc::kUnavailable
                        : ge.is_lease_not_found()                      ? Errc::kLeaseNotFound
                                                                       : Errc::kRejected;
            Status s{code, where + ": keep-alive stream error: " + ge.message};
            return {s, s.retryable()};
        }
        if (parsed.result.id != id) {
            return {{Errc::kBadAnswer, where + ": keep-alive answer for another lease"}, false};
        }
        out = std::move(parsed.result);
        return {{Errc::kOk, where}, false};
    }

    Attempt watch_once(std::size_t index, const std::string &body, const WatchOptions &wo,
                       const WatchCallback &on_result, Clock::time_point establish_by,
                       long budget_ms) {
        const std::string &where = options.endpoints[index];
        std::string url = where + "/v3/watch";
        Sink sink;
        sink.on_result = &on_result;
        prepare(easy[index], url, body, sink);
        auto lines = [&] { return sink.http != 200 || sink.split_lines(); };
        Run run = drive(
            easy[index], wo.stop,
            [&] {
                if (!sink.established) return establish_by;
                if (wo.silence_timeout.count() <= 0) return Clock::time_point::max();
                return sink.last_data + wo.silence_timeout;
            },
            lines);
        if (run.outcome == Outcome::kFinished && !sink.ended && !sink.thrown) lines();  // the last turn's
        if (sink.thrown) std::rethrow_exception(sink.thrown);
        bool retry_elsewhere = !sink.established;
        if (sink.ended) {
            sink.end_status.message = where + ": " + sink.end_status.message;
            return {sink.end_status, retry_elsewhere && sink.end_status.retryable()};
        }
        if (run.outcome == Outcome::kDeadline && sink.established) {
            return {{Errc::kUnavailable, where + ": watch stream silent for " +
                                             std::to_string(wo.silence_timeout.count()) + " ms"},
                    false};
        }
        if (run.outcome != Outcome::kFinished || run.code != CURLE_OK) {
            Attempt a = transport_failure(run, sink, budget_ms, where);
            a.fail_over = a.fail_over && retry_elsewhere;
            return a;
        }
        curl_easy_getinfo(easy[index], CURLINFO_RESPONSE_CODE, &sink.http);
        if (sink.http != 200) {
            Attempt a = classify_http(sink.http, sink.body, where);
            a.fail_over = a.fail_over && retry_elsewhere;
            return a;
        }
        // etcd ends a stream with an error line it does not end with '\n'
        if (!sink.body.empty()) {
            std::string last = std::move(sink.body);
            sink.body.clear();
            if (!sink.deliver(last)) {
                if (sink.thrown) std::rethrow_exception(sink.thrown);
                sink.end_status.message = where + ": " + sink.end_status.message;
                return {sink.end_status, retry_elsewhere && sink.end_status.retryable()};
            }
        }
        return {{Errc::kUnavailable, where + ": watch stream ended by the server"}, retry_elsewhere};
    }
};

// ---- the public face ----------------------------------------------------

std::unique_ptr<Client> Client::make(ClientOptions options, std::string &error) {
    if (options.endpoints.empty()) {
        error = "no etcd endpoint";
        return nullptr;
    }
    for (std::string &e : options.endpoints) {
        if (!e.empty() && e.back() == '/') e.pop_back();
        if (!valid_endpoint(e, error)) return nullptr;
    }
    if (options.request_timeout.count() <= 0) {
        error = "the etcd request timeout must be positive";
        return nullptr;
    }
    if (options.max_answer_bytes == 0 || options.max_answer_bytes > kMaxAnswerBytes) {
        error = "the etcd answer limit must be 1.." + std::to_string(kMaxAnswerBytes) + " bytes";
        return nullptr;
    }
    auto impl = std::make_unique<Impl>();
    impl->options = std::move(options);
    if (!impl->start(error)) return nullptr;
    return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

void Client::cancel() {
    impl_->canceled.store(true);
    curl_multi_wakeup(impl_->multi);  // may be called from any thread
}

const std::string &Client::preferred_endpoint() const {
    return impl_->options.endpoints[impl_->preferred];
}

uint64_t Client::connections_opened() const { return impl_->connects; }

Status Client::range(const RangeRequest &request, RangeResponse &out) {
    return impl_->call("/v3/kv/range", build_range_request(request), out, parse_range_response);
}

Status Client::range_all(const RangeRequest &request, int64_t page_size, const PageCallback &on_page,
                         int64_t *revision) {
    if (page_size <= 0) return {Errc::kRejected, "range_all: the page size must be positive"};
    RangeRequest page = request;
    page.limit = page_size;
    for (;;) {
        RangeResponse r;
        Status s = range(page, r);
        if (!s.ok()) return s;
        if (page.revision == 0) page.revision = r.header.revision;  // pinned from now on
        if (revision != nullptr) *revision = page.revision;
        if (!on_page(r)) return {};
        if (!r.more || r.kvs.empty() || page.range_end.empty()) return {};
        // the smallest key after the last one read
        page.key = r.kvs.back().key;
        page.key.push_back('\0');
    }
}

Status Client::put(const PutRequest &request, PutResponse &out) {
    return impl_->call("/v3/kv/put", build_put_request(request), out, parse_put_response);
}

Status Client::delete_range(const DeleteRangeRequest &request, DeleteRangeResponse &out) {
    return impl_->call("/v3/kv/deleterange", build_delete_range_request(request), out,
                       parse_delete_range_response);
}

Status Client::txn(const TxnRequest &request, TxnResponse &out) {
    return impl_->call("/v3/kv/txn", build_txn_request(request), out, parse_txn_response);
}

Status Client::status(StatusResponse &out) {
    return impl_->call("/v3/maintenance/status", build_status_request(), out, parse_status_response);
}

Status Client::compact(int64_t revision, bool physical, CompactionResponse &out) {
    return impl_->call("/v3/kv/compaction", build_compaction_request(revision, physical), out,
                       parse_compaction_response);
}

Status Client::lease_grant(const LeaseGrantRequest &request, LeaseGrantResponse &out) {
    return impl_->call("/v3/lease/grant", build_lease_grant_request(request), out,
                       parse_lease_grant_response);
}

Status Client::lease_keepalive(int64_t id, LeaseKeepAliveResponse &out) {
    const std::string body = build_lease_keepalive_request(id);
    return impl_->over_endpoints([&](std::size_t index, Clock::time_point until, long budget_ms) {
        std::string answer;
        Impl::Attempt a =
            impl_->unary_once(index, "/v3/lease/keepalive", body, until, budget_ms, answer, true);
        if (!a.status.ok()) return a;
        return Impl::read_keepalive(answer, id, out, impl_->options.endpoints[index]);
    });
}

Status Client::lease_revoke(int64_t id, LeaseRevokeResponse &out) {
    return impl_->call("/v3/lease/revoke", build_lease_revoke_request(id), out,
                       parse_lease_revoke_response);
}

Status Client::watch(const WatchCreateRequest &request, const WatchOptions &options,
                     const WatchCallback &on_result) {
    const std::string body = build_watch_create_request(request);
    std::size_t used = impl_->preferred;
    Status s = impl_->over_endpoints([&](std::size_t index, Clock::time_point until, long budget_ms) {
        used = index;
        return impl_->watch_once(index, body, options, on_result, until, budget_ms);
    });
    // a stream that broke sends the next watch to the next member
    if (s.retryable()) impl_->preferred = (used + 1) % impl_->options.endpoints.size();
    return s;
}

}  // namespace keyauth::etcd
