// A real HTTPS server on loopback for tests of the webhook sender: it
// records every request (method, target, headers, body) and answers each by
// a script (a status, headers such as Location, or no answer at all). Made
// with PlainHttp, it speaks plain HTTP instead, for clients an operator may
// point at an http URL (GitHub's key list, tests/github_keys_test.cc). Each
// connection has its own thread, so a held connection never stops the next
// one. It listens on a port the kernel chose (no race for a free port) and
// can say exactly whether anything connected to it: enough to show that a
// refused delivery never reached it.
//
// Waits are on conditions with deadlines (wait_for_requests), never sleeps.
// Constructing one ignores SIGPIPE in the process (a client that goes away
// mid-answer must not kill the test binary).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace keyauth::testing {

struct ReceivedRequest {
    std::string method;
    std::string target;
    std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, in order
    std::string body;

    // The first header of that (lowercase) name, or "" if none.
    std::string header(std::string_view name) const {
        for (const auto &h : headers) {
            if (h.first == name) return h.second;
        }
        return "";
    }
    bool has_header(std::string_view name) const {
        return std::any_of(headers.begin(), headers.end(), [&](const auto &h) { return h.first == name; });
    }
};

struct ReceiverAnswer {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Location", url}
    std::string body;
    bool hold = false;     // read the request, then never answer (until the receiver goes)
    bool endless = false;  // the status and headers, then a body that never ends

    static ReceiverAnswer status_of(int status, std::vector<std::pair<std::string, std::string>> headers = {},
                                    std::string body = {}) {
        ReceiverAnswer a;
        a.status = status;
        a.headers = std::move(headers);
        a.body = std::move(body);
        return a;
    }
    static ReceiverAnswer endless_body(int status) {
        ReceiverAnswer a = status_of(status);
        a.endless = true;
        return a;
    }
    static ReceiverAnswer never() {
        ReceiverAnswer a;
        a.hold = true;
        return a;
    }
};

// Constructor tag: the receiver speaks plain HTTP, without TLS.
struct PlainHttp {};

class HttpsReceiver {
public:
    explicit HttpsReceiver(PlainHttp, const std::string &address = "127.0.0.1") : address_(address) {
        signal(SIGPIPE, SIG_IGN);
        start();
    }

    // Listens on `address` (127.0.0.1 or ::1) with the PEM certificate
    // chain and key given. ok() says whether it could; error() why not.
    HttpsReceiver(const std::string &cert_file, const std::string &key_file,
                  const std::string &address = "127.0.0.1")
        : address_(address) {
        signal(SIGPIPE, SIG_IGN);
        ctx_ = SSL_CTX_new(TLS_server_method());
        if (ctx_ == nullptr || SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
            error_ = "the certificate or key could not be loaded";
            ERR_clear_error();
            return;
        }
        start();
    }

    ~HttpsReceiver() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping_ = true;
            for (int fd : open_) shutdown(fd, SHUT_RDWR);  // wakes a reading or held connection
        }
        changed_.notify_all();
        if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
        if (acceptor_.joinable()) acceptor_.join();
        for (std::thread &t : workers_) t.join();
        for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
            if (fd >= 0) close(fd);
        }
        SSL_CTX_free(ctx_);
    }

    HttpsReceiver(const HttpsReceiver &) = delete;
    HttpsReceiver &operator=(const HttpsReceiver &) = delete;

    bool ok() const { return error_.empty(); }
    const std::string &error() const { return error_; }
    int port() const { return port_; }
    std::string url(const std::string &path = "/") const {
        const std::string host = address_.find(':') != std::string::npos ? "[" + address_ + "]" : address_;
        return (ctx_ != nullptr ? "https://" : "http://") + host + ":" + std::to_string(port_) + path;
    }

    // How the following requests are answered: each takes the next answer,
    // the last one repeats (e.g. {500, 500, 500, 200}). By default 200.
    void script(std::vector<ReceiverAnswer> answers) {
        std::lock_guard<std::mutex> lock(mu_);
        script_ = std::move(answers);
        next_ = 0;
    }
    void answer(ReceiverAnswer a) { script({std::move(a)}); }

    // True once `count` whole requests were received, false at the deadline.
    bool wait_for_requests(size_t count, std::chrono::milliseconds within) {
        std::unique_lock<std::mutex> lock(mu_);
        return changed_.wait_for(lock, within, [&] { return requests_.size() >= count; });
    }

    std::vector<ReceivedRequest> requests() const {
        std::lock_guard<std::mutex> lock(mu_);
        return requests_;
    }

    // TCP connections made to it so far, counting one still waiting in the
    // listen queue: once a client call has returned, 0 means it never
    // connected (no race with the accepting thread).
    size_t connections() const {
        std::lock_guard<std::mutex> lock(mu_);
        pollfd p{listen_fd_, POLLIN, 0};
        const bool queued = listen_fd_ >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
        return accepted_ + (queued ? 1 : 0);
    }

private:
    static constexpr size_t kMaxHead = 64 * 1024;
    static constexpr size_t kMaxBody = 16 * 1024 * 1024;

    // One connection's bytes: through TLS, or straight on the socket.
    struct Conn {
        SSL *ssl = nullptr;
        int fd = -1;
        int read(char *buf, int len) const {
            return ssl != nullptr ? SSL_read(ssl, buf, len)
                                  : static_cast<int>(recv(fd, buf, static_cast<size_t>(len), 0));
        }
        int write(const char *data, int len) const {
            return ssl != nullptr ? SSL_write(ssl, data, len)
                                  : static_cast<int>(send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL));
        }
    };

    void start() {
        if (!listen_on(address_)) return;
        if (pipe2(wake_, O_CLOEXEC) != 0) {
            error_ = std::string("pipe: ") + std::strerror(errno);
            return;
        }
        acceptor_ = std::thread([this] { accept_loop(); });
    }

    bool listen_on(const std::string &address) {
        sockaddr_storage ss{};
        socklen_t len = 0;
        auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
        auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
        if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
            v4->sin_family = AF_INET;
            len = sizeof *v4;
        } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            len = sizeof *v6;
        } else {
            error_ = address + " is not an address";
            return false;
        }
        listen_fd_ = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr *>(&ss), len) != 0 ||
            listen(listen_fd_, 16) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr *>(&ss), &len) != 0) {
            error_ = "cannot listen on " + address + ": " + std::strerror(errno);
            return false;
        }
        port_ = ntohs(ss.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
        return true;
    }

    void accept_loop() {
        for (;;) {
            pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
            if (poll(p, 2, -1) < 0 && errno != EINTR) return;
            std::lock_guard<std::mutex> lock(mu_);
            if (stopping_) return;
            if ((p[0].revents & POLLIN) == 0) continue;
            int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            accepted_++;
            open_.insert(fd);
            workers_.emplace_back([this, fd] { serve(fd); });
        }
    }

    void serve(int fd) {
        // a peer that stalls can hold a worker no longer than this
        timeval limit{30, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        SSL *ssl = ctx_ != nullptr ? SSL_new(ctx_) : nullptr;
        const bool ready = ctx_ == nullptr || (ssl != nullptr && SSL_set_fd(ssl, fd) == 1 && SSL_accept(ssl) == 1);
        const Conn conn{ssl, fd};
        ReceivedRequest request;
        if (ready && read_request(conn, request)) {
            ReceiverAnswer a;
            {
                std::lock_guard<std::mutex> lock(mu_);
                if (!script_.empty()) a = script_[std::min(next_++, script_.size() - 1)];
                requests_.push_back(std::move(request));
            }
            changed_.notify_all();
            if (a.hold) {
                std::unique_lock<std::mutex> lock(mu_);
                changed_.wait(lock, [this] { return stopping_; });
            } else if (a.endless) {
                // until the client goes (or the receiver does)
                bool more = write_all(conn, head_of(a, uint64_t{1} << 40));
                while (more && !stopping()) more = write_all(conn, std::string(16 * 1024, 'z'));
            } else {
                write_all(conn, head_of(a, a.body.size()) + a.body);
                if (ssl != nullptr) SSL_shutdown(ssl);
            }
        }
        ERR_clear_error();
        SSL_free(ssl);
        std::lock_guard<std::mutex> lock(mu_);
        open_.erase(fd);
        close(fd);
    }

    bool stopping() const {
        std::lock_guard<std::mutex> lock(mu_);
        return stopping_;
    }

    static std::string head_of(const ReceiverAnswer &a, uint64_t length) {
        std::string head = "HTTP/1.1 " + std::to_string(a.status) + " Test\r\n";
        for (const auto &h : a.headers) head += h.first + ": " + h.second + "\r\n";
        return head + "Content-Length: " + std::to_string(length) + "\r\nConnection: close\r\n\r\n";
    }

    static bool write_all(const Conn &conn, const std::string &data) {
        size_t done = 0;
        while (done < data.size()) {
            const int n = conn.write(data.data() + done, static_cast<int>(std::min<size_t>(data.size() - done, 1 << 20)));
            if (n <= 0) return false;
            done += static_cast<size_t>(n);
        }
        return true;
    }

    // One HTTP/1.1 request with a Content-Length body (what libcurl sends).
    static bool read_request(const Conn &conn, ReceivedRequest &out) {
        std::string data;
        size_t head_end;
        char buf[16384];
        while ((head_end = data.find("\r\n\r\n")) == std::string::npos) {
            if (data.size() > kMaxHead) return false;
            const int n = conn.read(buf, sizeof buf);
            if (n <= 0) return false;
            data.append(buf, static_cast<size_t>(n));
        }
        std::string_view head(data.data(), head_end);
        size_t line_end = head.find("\r\n");
        std::string_view first = head.substr(0, line_end);
        const size_t sp1 = first.find(' '), sp2 = first.rfind(' ');
        if (sp1 == std::string_view::npos || sp2 == sp1) return false;
        out.method = std::string(first.substr(0, sp1));
        out.target = std::string(first.substr(sp1 + 1, sp2 - sp1 - 1));
        size_t length = 0;
        while (line_end != std::string_view::npos) {
            const size_t start = line_end + 2;
            line_end = head.find("\r\n", start);
            std::string_view line = head.substr(start, line_end == std::string_view::npos ? head.npos : line_end - start);
            const size_t colon = line.find(':');
            if (colon == std::string_view::npos) return false;
            std::string name(line.substr(0, colon));
            std::transform(name.begin(), name.end(), name.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            std::string_view value = line.substr(colon + 1);
            while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
            while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
            if (name == "content-length") length = std::strtoul(std::string(value).c_str(), nullptr, 10);
            out.headers.emplace_back(std::move(name), std::string(value));
        }
        if (length > kMaxBody) return false;
        out.body = data.substr(head_end + 4);
        while (out.body.size() < length) {
            const int n = conn.read(buf, sizeof buf);
            if (n <= 0) return false;
            out.body.append(buf, static_cast<size_t>(n));
        }
        out.body.resize(length);
        return true;
    }

    std::string address_;
    std::string error_;
    SSL_CTX *ctx_ = nullptr;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    int port_ = 0;
    std::thread acceptor_;

    mutable std::mutex mu_;
    std::condition_variable changed_;
    bool stopping_ = false;
    size_t accepted_ = 0;
    std::set<int> open_;
    std::vector<std::thread> workers_;
    std::vector<ReceiverAnswer> script_;
    size_t next_ = 0;
    std::vector<ReceivedRequest> requests_;
};

}  // namespace keyauth::testing
