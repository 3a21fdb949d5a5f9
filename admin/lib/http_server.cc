#include "http_server.h"

#include <sys/resource.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "bounded_pool.h"
#include "cli_values.h"
#include "url.h"

namespace keyauth {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

// Before closing, what the client still sends is read and dropped for this
// long, or this much (see Session::linger).
constexpr std::chrono::seconds kLingerTime{2};
constexpr size_t kLingerBytes = 64 * 1024;

// Connections taken from the kernel's queue per wake-up of the accept loop.
constexpr int kAcceptBatch = 64;

HttpResponse closing(HttpResponse r) {
    r.headers.emplace_back("Connection", "close");
    return r;
}

HttpResponse server_error(int status, const char *code, const char *message) {
    return closing(json_error(status, code, message));
}

// One header that must not appear twice: two different Authorization or
// Content-Type values leave it open which one the API judged.
bool repeated(const http::fields &fields, http::field name) {
    auto range = fields.equal_range(name);
    return range.first != range.second && std::next(range.first) != range.second;
}

// A streamed answer's hand-over between the worker that makes its pieces
// and the loop that writes them: the worker waits for each write to finish
// before making the next piece, so one piece is held at a time.
class StreamGate {
public:
    // On the loop thread: the last write finished (ok), or the connection
    // is gone (the worker stops).
    void done(bool ok) {
        std::lock_guard<std::mutex> lock(mu_);
        finished_ = true;
        failed_ = failed_ || !ok;
        cv_.notify_one();
    }
    // On the worker: whether the last write succeeded. A loop that stopped
    // running never answers: the limit frees the worker anyway.
    bool wait(std::chrono::milliseconds limit) {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_for(lock, limit, [this] { return finished_; })) failed_ = true;
        finished_ = false;
        return !failed_;
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool finished_ = false;
    bool failed_ = false;
};

}  // namespace

class Session;

struct HttpServer::Impl {
    HttpServer::Handler handler;
    HttpServerLimits limits;
    Logger log;
    net::io_context ioc{1};
    // Registered before anything else runs, so a signal during start-up is
    // held until the loop runs.
    net::signal_set signals{ioc, SIGTERM, SIGINT};
    tcp::acceptor acceptor{ioc};
    net::steady_timer accept_retry{ioc};
    net::steady_timer stop_deadline{ioc};
    BoundedPool pool;
    std::vector<std::string> trusted_proxies;  // set before the loop runs; read-only after
    std::unordered_set<Session *> sessions;  // open ones; touched on the loop thread only
    // Set on the loop thread; workers read it to skip requests still queued.
    std::atomic<bool> stopping{false};
    bool forced = false;

    Impl(HttpServer::Handler a, HttpServerLimits l, Logger lg)
        : handler(std::move(a)), limits(l), log(std::move(lg)), pool(l.workers, l.queue) {}

    void accept();
    void admit(tcp::socket socket);
    void on_signal();
    void stop();
    void forget(Session *s);
    void end_if_drained();
};

class Session : public std::enable_shared_from_this<Session> {
public:
    Session(HttpServer::Impl &srv, tcp::socket socket)
        : srv_(srv),
          stream_(std::move(socket)),
          deadline_(stream_.get_executor()),
          buffer_(srv.limits.max_header_bytes + std::max(srv.limits.max_body, srv.limits.large_body) + 4096) {
        beast::error_code ec;
        auto ep = stream_.socket().remote_endpoint(ec);
        // canonical, so that a v4 peer of a dual-stack listener is 1.2.3.4
        // (not ::ffff:1.2.3.4) for the log and the trusted proxies alike
        if (!ec) remote_ = canonical_address(ep.address().to_string());
        log_.remote = remote_;
    }

    void start() {
        srv_.sessions.insert(this);
        next_request();
    }

    // Over the connection limit: a fast refusal, never a wait.
    void refuse() {
        srv_.sessions.insert(this);
        respond(server_error(503, "SERVER_BUSY", "Too many connections; try again shortly"));
    }

    // SIGTERM: a connection between requests or still sending one closes
    // now; one whose request is being served answers first.
    void on_stop() {
        if (state_ == State::kIdle || state_ == State::kHead || state_ == State::kBody) {
            close();
        } else {
            close_after_ = true;
        }
    }

private:
    enum class State { kIdle, kHead, kBody, kWorking, kWriting, kLinger, kClosed };

    // Every completion handler starts here: a connection closed meanwhile
    // (by a stop, a deadline) goes no further, even if its read succeeded.
    bool closed() const { return state_ == State::kClosed; }

    void next_request() {
        if (closed()) return;
        if (srv_.stopping) return close();
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(srv_.limits.max_header_bytes));
        parser_->body_limit(srv_.limits.max_body);
        log_ = ExchangeLog{};
        log_.remote = remote_;
        is_head_ = false;
        if (buffer_.size() > 0) {  // pipelined
            start_head();
            return;
        }
        // Waiting for a first byte costs no thread; the head deadline starts
        // with it.
        state_ = State::kIdle;
        stream_.expires_after(srv_.limits.idle_timeout);
        stream_.async_read_some(
            buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
                if (self->closed()) return;
                self->buffer_.commit(n);
                if (ec || n == 0) return self->close();
                self->start_head();
            });
    }

    // A head or body deadline answers 408 before closing; the stream's own
    // timeout would close the socket first, so a timer of its own cancels
    // the read instead. The generation tells a deadline that fired just as
    // its read completed from one for the read going on now.
    void arm_deadline(std::chrono::milliseconds limit) {
        stream_.expires_never();
        timed_out_ = false;
        const unsigned generation = ++deadline_generation_;
        deadline_.expires_after(limit);
        deadline_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
            if (ec || self->closed() || generation != self->deadline_generation_) return;
            self->timed_out_ = true;
            beast::error_code ignored;
            self->stream_.socket().cancel(ignored);
        });
    }

    void disarm_deadline() {
        ++deadline_generation_;
        deadline_.cancel();
    }

    void start_head() {
        state_ = State::kHead;
        arm_deadline(srv_.limits.head_timeout);
        read_head();
    }

    // The head is gathered here, up to its blank line, and only then given
    // to the parser whole: the limit is exact, and whether the request line
    // itself was too long (414) can be told from the bytes.
    void read_head() {
        auto data = buffer_.cdata();
        std::string_view seen(static_cast<const char *>(data.data()), data.size());
        const size_t limit = srv_.limits.max_header_bytes;
        size_t end = seen.find("\r\n\r\n");
        if (end != std::string_view::npos && end + 4 <= limit) return parse_head(end + 4);
        if (seen.size() >= limit) {
            disarm_deadline();
            if (seen.substr(0, limit).find('\n') == std::string_view::npos) {
                return respond(server_error(414, "URI_TOO_LONG", "The request line is over 16 KiB"));
            }
            return respond(server_error(431, "HEADERS_TOO_LARGE", "The request head is over 16 KiB"));
        }
        stream_.async_read_some(buffer_.prepare(std::min<size_t>(4096, limit + 4 - seen.size())),
                                [self = shared_from_this()](beast::error_code ec, size_t n) {
                                    if (self->closed()) return;
                                    self->buffer_.commit(n);
                                    if (ec) return self->on_read_error(ec);
                                    self->read_head();
                                });
    }

    // The body limit of the request whose head is `head`: its path's, read
    // from the request line (the parser checks Content-Length against the
    // limit as it reads the head).
    size_t body_limit_for(std::string_view head) const {
        const size_t start = head.find(' ');
        if (start == std::string_view::npos || srv_.limits.large_body_paths.empty()) return srv_.limits.max_body;
        std::string_view target = head.substr(start + 1, head.find_first_of(" ?\r\n", start + 1) - start - 1);
        for (const std::string &p : srv_.limits.large_body_paths) {
            if (target == p) return std::max(srv_.limits.max_body, srv_.limits.large_body);
        }
        return srv_.limits.max_body;
    }

    HttpResponse too_large() const {
        return closing(json_error(413, "PAYLOAD_TOO_LARGE",
                                  "The body is larger than " + std::to_string(body_limit_ / 1024) + " KiB"));
    }

    void parse_head(size_t head_bytes) {
        disarm_deadline();
        beast::error_code ec;
        auto data = buffer_.cdata();
        body_limit_ = body_limit_for(std::string_view(static_cast<const char *>(data.data()), head_bytes));
        parser_->body_limit(body_limit_);
        size_t used = parser_->put(net::const_buffer(data.data(), head_bytes), ec);
        buffer_.consume(used);
        if (!ec && !parser_->is_header_done()) ec = http::error::partial_message;
        if (ec == http::error::body_limit) return respond(too_large());
        if (ec) return respond(server_error(400, "BAD_REQUEST", "Malformed HTTP request"));
        const auto &req = parser_->get();
        log_.started = std::chrono::steady_clock::now();
        log_.method = std::string(req.method_string());
        auto target = req.target();
        log_.path = std::string(target.substr(0, target.find('?')));
        is_head_ = req.method() == http::verb::head;
        size_t fields = 0;
        for (auto it = req.begin(); it != req.end(); ++it) fields++;
        if (fields > srv_.limits.max_header_fields) {
            return respond(server_error(431, "HEADERS_TOO_LARGE", "Too many header fields"));
        }
        // A body this server will not read: refused before a byte of it is.
        if (req.count(http::field::content_encoding)) {
            return respond(server_error(415, "UNSUPPORTED_MEDIA_TYPE",
                                        "Compressed request bodies are not accepted"));
        }
        if (req.count(http::field::transfer_encoding)) {
            return respond(server_error(411, "LENGTH_REQUIRED", "Send the body with a Content-Length"));
        }
        if (repeated(req, http::field::authorization) || repeated(req, http::field::content_type)) {
            return respond(server_error(400, "BAD_REQUEST",
                                        "Authorization and Content-Type may be sent once"));
        }
        if (parser_->is_done()) return dispatch();
        if (beast::iequals(req[http::field::expect], "100-continue")) return send_continue();
        read_body();
    }

    // A client that asked waits for this before sending its body.
    void send_continue() {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        state_ = State::kWriting;
        stream_.expires_after(srv_.limits.write_timeout);
        net::async_write(stream_, net::buffer(kContinue, sizeof kContinue - 1),
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (self->closed()) return;
                             if (ec) return self->close();
                             self->read_body();
                         });
    }

    void read_body() {
        state_ = State::kBody;
        arm_deadline(srv_.limits.body_timeout);
        http::async_read(stream_, buffer_, *parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (self->closed()) return;
                             if (ec) return self->on_read_error(ec);
                             self->disarm_deadline();
                             self->dispatch();
                         });
    }

    void on_read_error(beast::error_code ec) {
        disarm_deadline();
        if (srv_.stopping) return close();
        if (timed_out_) {
            return respond(server_error(408, "REQUEST_TIMEOUT",
                                        state_ == State::kHead ? "The request head took too long"
                                                               : "The request body took too long"));
        }
        if (ec == http::error::body_limit) return respond(too_large());
        if (ec.category() == http::make_error_code(http::error::bad_method).category() &&
            ec != http::error::end_of_stream && ec != http::error::partial_message &&
            ec != http::error::buffer_overflow) {
            return respond(server_error(400, "BAD_REQUEST", "Malformed HTTP request"));
        }
        close();  // the client went away, or a transport error
    }

    void dispatch() {
        if (closed()) return;
        state_ = State::kWorking;
        auto req = std::make_shared<http::request<http::string_body>>(parser_->release());
        keep_alive_ = req->keep_alive();
        auto self = shared_from_this();
        bool queued = srv_.pool.try_submit([self, req] {
            HttpResponse out;
            try {
                // Still queued when the server stopped: its answer could not
                // be sent, so it does not run at all.
                out = self->srv_.stopping
                          ? server_error(503, "SERVER_STOPPING", "The server is stopping; retry")
                          : self->serve(*req);
            } catch (...) {
                out = server_error(500, "INTERNAL_ERROR", "The request could not be completed");
            }
            if (out.stream) return self->stream_answer(std::move(out));
            net::post(self->stream_.get_executor(),
                      [self, out = std::move(out)]() mutable { self->respond(std::move(out)); });
        });
        if (!queued) {
            HttpResponse busy = json_error(503, "SERVER_BUSY", "The server is busy; try again shortly");
            busy.headers.emplace_back("Retry-After", "1");
            respond(std::move(busy));
        }
    }

    // On a worker thread: the request as the API sees it. Reads only the
    // request it was handed and the API.
    HttpResponse serve(const http::request<http::string_body> &req) const {
        HttpRequest in;
        in.method = std::string(req.method_string());
        std::string_view target(req.target().data(), req.target().size());
        size_t q = target.find('?');
        std::string_view query = q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
        if (!percent_decode(target.substr(0, q), in.path)) {
            return json_error(400, "BAD_REQUEST", "The path has a malformed %-escape");
        }
        QueryParam limit = query_param(query, "limit", in.query_limit);
        QueryParam cursor = query_param(query, "cursor", in.query_cursor);
        if (limit == QueryParam::kBad || cursor == QueryParam::kBad) {
            return json_error(400, "BAD_REQUEST", "The query has a malformed %-escape");
        }
        in.query = std::string(query);
        in.has_limit = limit == QueryParam::kFound;
        in.has_cursor = cursor == QueryParam::kFound;
        auto auth = req.find(http::field::authorization);
        in.has_authorization = auth != req.end();
        if (in.has_authorization) in.authorization = std::string(auth->value());
        in.content_type = std::string(req[http::field::content_type]);
        in.accept = std::string(req[http::field::accept]);
        auto real_ip = req.find("X-Real-IP");
        const std::string real_ip_value = real_ip == req.end() ? std::string() : std::string(real_ip->value());
        in.client_address =
            client_address(remote_, real_ip == req.end() ? nullptr : &real_ip_value, srv_.trusted_proxies);
        in.github_key_identifier = std::string(req["Github-Public-Key-Identifier"]);
        in.github_key_signature = std::string(req["Github-Public-Key-Signature"]);
        in.body = req.body();
        return srv_.handler(in);
    }

    // The head of an answer, whole or streamed: its status and fields,
    // whether the connection closes after it, and the log line.
    template <class Body>
    void head(http::response<Body> &res, HttpResponse &out) {
        bool close = !keep_alive_ || srv_.stopping || close_after_ || state_ != State::kWorking;
        res = {};
        res.version(11);
        res.result(static_cast<unsigned>(out.status));
        for (const auto &h : out.headers) {
            if (beast::iequals(h.first, "Connection") && beast::iequals(h.second, "close")) {
                close = true;
            } else {
                res.set(h.first, h.second);
            }
        }
        res.set(http::field::content_type, out.content_type);
        res.keep_alive(!close);
        close_after_ = close;
        log_.status = out.status;
        if (log_.started != std::chrono::steady_clock::time_point{}) {
            log_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - log_.started).count();
        }
        log_.account = std::move(out.account);
        log_.internal_error = std::move(out.internal_error);
        if (srv_.log) srv_.log(log_);
        state_ = State::kWriting;
        stream_.expires_after(srv_.limits.write_timeout);
    }

    // After the whole answer went out: the next request, or the end.
    void answered() {
        if (close_after_) return linger();
        next_request();
    }

    void respond(HttpResponse out) {
        if (closed()) return;
        head(res_, out);
        res_.body() = std::move(out.body);
        res_.prepare_payload();
        if (is_head_) {
            // the length of what GET would send, and no body (RFC 9110 9.3.2)
            res_.body().clear();
        }
        auto done = [self = shared_from_this()](beast::error_code ec, size_t) {
            if (self->closed()) return;
            if (ec) return self->close();
            self->answered();
        };
        if (is_head_) {
            serializer_.emplace(res_);
            http::async_write_header(stream_, *serializer_, std::move(done));
        } else {
            http::async_write(stream_, res_, std::move(done));
        }
    }

    // On the worker thread that ran the handler: the head, then the first
    // part and each piece as the producer makes it, one write at a time.
    void stream_answer(HttpResponse out) {
        auto self = shared_from_this();
        auto gate = std::make_shared<StreamGate>();
        auto make = std::move(out.stream);
        auto trailer = std::move(out.trailer);
        auto piece = std::make_shared<std::string>(std::move(out.body));
        out.body.clear();
        // a write gets the server's write limit, and a little for the loop
        const auto limit = srv_.limits.write_timeout + std::chrono::seconds(1);
        net::post(stream_.get_executor(),
                  [self, gate, out = std::move(out)]() mutable { self->write_stream_head(std::move(out), gate); });
        if (!gate->wait(limit)) return;
        for (;;) {
            bool last = false;
            if (piece->empty()) {
                try {
                    last = !make(*piece);
                } catch (...) {
                    // the status is sent: all that is left is not to end
                    // the transfer as if it were whole
                    net::post(stream_.get_executor(), [self] { self->close(); });
                    return;
                }
            }
            auto fields = std::make_shared<std::string>();
            if (last && trailer) {
                try {
                    for (const auto &[name, value] : trailer()) *fields += name + ": " + value + "\r\n";
                } catch (...) {
                    net::post(stream_.get_executor(), [self] { self->close(); });
                    return;
                }
                if (!fields->empty()) *fields += "\r\n";
            }
            net::post(stream_.get_executor(),
                      [self, gate, piece, last, fields] { self->write_piece(piece, last, fields, gate); });
            if (!gate->wait(limit) || last) return;
            piece = std::make_shared<std::string>();
        }
    }

    void write_stream_head(HttpResponse out, std::shared_ptr<StreamGate> gate) {
        if (closed()) return gate->done(false);
        head(stream_res_, out);
        stream_res_.chunked(true);
        stream_serializer_.emplace(stream_res_);
        http::async_write_header(stream_, *stream_serializer_,
                                 [self = shared_from_this(), gate](beast::error_code ec, size_t) {
                                     if (self->closed() || ec) {
                                         gate->done(false);
                                         return self->close();
                                     }
                                     // HEAD: the head is the whole answer
                                     if (self->is_head_) {
                                         gate->done(false);
                                         return self->answered();
                                     }
                                     gate->done(true);
                                 });
    }

    // A piece as one chunk (none when empty), and the last chunk after the
    // last piece, with the trailer's fields (their lines and the blank one).
    void write_piece(std::shared_ptr<std::string> piece, bool last, std::shared_ptr<std::string> fields,
                     std::shared_ptr<StreamGate> gate) {
        if (closed()) return gate->done(false);
        stream_.expires_after(srv_.limits.write_timeout);
        auto self = shared_from_this();
        auto after = [self, last, fields, gate](beast::error_code ec, size_t) {
            if (self->closed() || ec) {
                gate->done(false);
                return self->close();
            }
            if (!last) return gate->done(true);
            self->stream_.expires_after(self->srv_.limits.write_timeout);
            auto ended = [self, gate, fields](beast::error_code ec2, size_t) {
                gate->done(!ec2 && !self->closed());
                if (self->closed()) return;
                if (ec2) return self->close();
                self->answered();
            };
            if (fields->empty()) return net::async_write(self->stream_, http::make_chunk_last(), std::move(ended));
            net::async_write(self->stream_, http::make_chunk_last(net::const_buffer(fields->data(), fields->size())),
                             std::move(ended));
        };
        if (piece->empty()) return after({}, 0);
        net::async_write(stream_, http::make_chunk(net::buffer(*piece)),
                         [piece, after = std::move(after)](beast::error_code ec, size_t n) { after(ec, n); });
    }

    // Half-close, then drop what the client still sends (an unread body,
    // pipelined requests) until it closes too: closing with unread bytes
    // makes the kernel send a reset that can destroy the answer in flight.
    void linger() {
        state_ = State::kLinger;
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        if (ec) return close();
        buffer_.clear();
        stream_.expires_after(kLingerTime);
        read_and_drop();
    }

    void read_and_drop() {
        stream_.async_read_some(buffer_.prepare(16384),
                                [self = shared_from_this()](beast::error_code ec, size_t n) {
                                    if (self->closed()) return;
                                    self->dropped_ += n;
                                    if (ec || self->dropped_ > kLingerBytes) return self->close();
                                    self->read_and_drop();
                                });
    }

    void close() {
        if (closed()) return;
        state_ = State::kClosed;
        disarm_deadline();
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream_.close();
        srv_.forget(this);
    }

    HttpServer::Impl &srv_;
    beast::tcp_stream stream_;
    net::steady_timer deadline_;
    unsigned deadline_generation_ = 0;
    bool timed_out_ = false;
    beast::flat_buffer buffer_;
    size_t body_limit_ = 0;  // this request's
    std::optional<http::request_parser<http::string_body>> parser_;
    http::response<http::string_body> res_;
    std::optional<http::response_serializer<http::string_body>> serializer_;
    http::response<http::empty_body> stream_res_;  // a streamed answer's head
    std::optional<http::response_serializer<http::empty_body>> stream_serializer_;
    std::string remote_;
    ExchangeLog log_;
    State state_ = State::kIdle;
    bool keep_alive_ = true;
    bool is_head_ = false;
    bool close_after_ = false;
    size_t dropped_ = 0;
};

void HttpServer::Impl::accept() {
    acceptor.async_accept(ioc, [this](beast::error_code ec, tcp::socket socket) {
        if (stopping) return;
        if (ec) {
            // Out of descriptors, say: wait a little rather than spin.
            accept_retry.expires_after(std::chrono::milliseconds(50));
            accept_retry.async_wait([this](beast::error_code) {
                if (!stopping) accept();
            });
            return;
        }
        admit(std::move(socket));
        // Empty the backlog while here, up to a batch: a flood of new
        // connections would otherwise keep a proxy's new connection waiting
        // in the kernel's queue behind thousands of others.
        for (int i = 0; i < kAcceptBatch; i++) {
            tcp::socket more(ioc);
            acceptor.accept(more, ec);  // non-blocking (see bind)
            if (ec) break;
            admit(std::move(more));
        }
        accept();
    });
}

void HttpServer::Impl::admit(tcp::socket socket) {
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    if (sessions.size() >= 2 * limits.max_connections) return;  // closed without a word
    auto session = std::make_shared<Session>(*this, std::move(socket));
    // Refusals are short-lived, but not free: past twice the limit (above)
    // the connection is closed at once.
    if (sessions.size() >= limits.max_connections) {
        session->refuse();
    } else {
        session->start();
    }
}

// The first SIGTERM or SIGINT stops gracefully; a second one stops at once.
void HttpServer::Impl::on_signal() {
    signals.async_wait([this](beast::error_code ec, int) {
        if (ec) return;
        if (!stopping) {
            on_signal();
            stop();
        } else {
            forced = true;
            ioc.stop();
        }
    });
}

void HttpServer::Impl::stop() {
    stopping = true;
    beast::error_code ec;
    acceptor.close(ec);
    accept_retry.cancel();
    stop_deadline.expires_after(limits.stop_timeout);
    stop_deadline.async_wait([this](beast::error_code ec) {
        if (ec) return;  // cancelled: everything was answered in time
        forced = true;
        ioc.stop();
    });
    std::vector<Session *> open(sessions.begin(), sessions.end());
    for (Session *s : open) s->on_stop();
    end_if_drained();
}

// The loop runs while anything is pending: after a stop, the deadline (and
// the wait for a second signal) are the last things, so the last connection
// gone ends the loop.
void HttpServer::Impl::forget(Session *s) {
    sessions.erase(s);
    end_if_drained();
}

void HttpServer::Impl::end_if_drained() {
    if (!stopping || !sessions.empty()) return;
    stop_deadline.cancel();
    beast::error_code ec;
    signals.cancel(ec);
}

std::string client_address(const std::string &peer, const std::string *real_ip,
                           const std::vector<std::string> &trusted_proxies) {
    if (real_ip && real_ip->size() <= 64 && is_ip_address(*real_ip) &&
        std::find(trusted_proxies.begin(), trusted_proxies.end(), peer) != trusted_proxies.end()) {
        return *real_ip;
    }
    return peer;
}

HttpServer::HttpServer(Handler handler, HttpServerLimits limits, Logger log)
    : impl_(std::make_unique<Impl>(std::move(handler), limits, std::move(log))) {}

HttpServer::~HttpServer() = default;

// Each connection is one descriptor, and refusals (up to as many again)
// hold one briefly: the soft limit is raised to the hard one, and the
// connection limit lowered if even that cannot hold twice as many plus a
// reserve, so that a new client meets a fast 503, not a stalled accept.
size_t HttpServer::fit_to_descriptors() {
    constexpr rlim_t kReserve = 64;  // the store, the log, the loop's own
    rlimit nofile{};
    if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return impl_->limits.max_connections;
    if (nofile.rlim_cur < nofile.rlim_max) {
        rlimit raised = nofile;
        raised.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 20);
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) nofile = raised;
    }
    size_t &max = impl_->limits.max_connections;
    if (nofile.rlim_cur != RLIM_INFINITY) {
        const size_t budget = nofile.rlim_cur > 2 * kReserve ? (nofile.rlim_cur - kReserve) / 2 : 1;
        max = std::min(max, budget);
    }
    return max;
}

void HttpServer::trust_proxies(std::vector<std::string> addresses) {
    impl_->trusted_proxies = std::move(addresses);
}

bool HttpServer::bind(const std::string &host, int port, std::string &error) {
    beast::error_code ec;
    auto address = net::ip::make_address(host, ec);
    if (ec) {
        error = "not an IP address: " + host;
        return false;
    }
    tcp::endpoint ep(address, static_cast<unsigned short>(port));
    auto &a = impl_->acceptor;
    if (!a.open(ep.protocol(), ec) && !a.set_option(net::socket_base::reuse_address(true), ec) &&
        !a.bind(ep, ec) && !a.listen(net::socket_base::max_listen_connections, ec) &&
        !a.non_blocking(true, ec)) {
        return true;
    }
    error = ec.message();
    return false;
}

HttpServer::Stopped HttpServer::run() {
    Impl &s = *impl_;
    s.on_signal();
    s.accept();
    s.ioc.run();
    Stopped how;
    how.all_answered = !s.forced;
    // A worker whose answer came too late still finishes its store write:
    // a commit is never cut short.
    how.workers_idle = s.pool.drain_until(Clock::now() + std::chrono::milliseconds(300));
    return how;
}

}  // namespace keyauth
