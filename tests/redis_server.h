// A real redis-server (Debian's) on a free loopback port for tests: nothing
// saved to disk, killed when the object goes or the test process dies
// (PR_SET_PDEATHSIG). exchange() runs one SharedExchange round trip over a
// blocking socket, as the nginx glue does over its non-blocking one.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "free_ports.h"
#include "temp_dir.h"
#include "shared_exchange.h"

namespace keyauth::testing {

class RedisServer {
public:
    // Fails the test (and leaves port() 0) if no redis-server answers within
    // 30 s; a port taken between choosing it and Redis binding it is chosen
    // again.
    explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
        for (int attempt = 0; attempt < 5; attempt++) {
            if (start(extra_, free_ports(1)[0])) return;
            stop();
        }
        port_ = 0;
        ADD_FAILURE() << "redis-server did not start";
    }
    ~RedisServer() { stop(); }
    RedisServer(const RedisServer &) = delete;
    RedisServer &operator=(const RedisServer &) = delete;

    int port() const { return port_; }

    // Killed (SIGKILL: nothing saved), as a crash would; started again on
    // the same port, empty, as an operator's restart would.
    void kill_server() { stop(); }
    bool restart() {
        stop();
        return start(extra_, port_);
    }

private:
    bool start(const std::vector<std::string> &extra, int port) {
        port_ = port;
        std::vector<std::string> args{"/usr/bin/redis-server", "--port", std::to_string(port_),
                                      "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                      "--dir", dir_.path()};
        args.insert(args.end(), extra.begin(), extra.end());
        std::vector<char *> argv;
        for (std::string &s : args) argv.push_back(s.data());
        argv.push_back(nullptr);
        pid_t parent = getpid();
        pid_ = fork();
        if (pid_ == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(127);
            int null = open("/dev/null", O_WRONLY);
            dup2(null, STDOUT_FILENO);
            execv(argv[0], argv.data());
            _exit(127);
        }
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < deadline) {
            int fd = connect_fd();
            if (fd >= 0) {
                close(fd);
                return true;
            }
            // exited: the port was taken meanwhile
            if (pid_ <= 0 || waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = -1;
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return false;
    }
    void stop() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        pid_ = -1;
    }

public:
    // A blocking connection with 10 s timeouts (a silent Redis fails a
    // test rather than hang it), or -1.
    int connect_fd() const {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval tv{10, 0};
        if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0 &&
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0 &&
            connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) {
            return fd;
        }
        if (fd >= 0) close(fd);
        return -1;
    }

    // Raw bytes in, everything Redis answers within a short wait out.
    std::string raw(const std::string &bytes) const {
        int fd = connect_fd();
        if (fd < 0) return "";
        (void)!write(fd, bytes.data(), bytes.size());
        timeval tv{0, 300000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string out;
        char buf[4096];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
        close(fd);
        return out;
    }

private:
    TempDir dir_;
    std::vector<std::string> extra_;
    int port_ = 0;
    pid_t pid_ = -1;
};

// One exchange over fd: begin, send, feed until done, finish. Returns
// finish()'s verdict (err says why not).
inline bool exchange(int fd, SharedExchange &x, RateTable &table, uint64_t now,
                     const RateLock &lock, ExchangeResult &out, std::string &err) {
    x.begin(table);
    const std::string &req = x.request();
    for (size_t sent = 0; sent < req.size();) {
        ssize_t n = write(fd, req.data() + sent, req.size() - sent);
        if (n <= 0) {
            err = "write failed";
            return false;
        }
        sent += static_cast<size_t>(n);
    }
    char buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            err = "read failed";
            return false;
        }
        SharedExchange::Feed f = x.feed(buf, static_cast<size_t>(n), err);
        if (f == SharedExchange::Feed::kError) return false;
        if (f == SharedExchange::Feed::kDone) break;
    }
    return x.finish(table, now, lock, out, err);
}

}  // namespace keyauth::testing
