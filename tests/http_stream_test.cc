// A streamed answer (HttpResponse::stream, the admin API's usage report)
// through the real HttpServer on a loopback port: the pieces arrive as
// chunks in order, the connection stays usable after the last one, a
// producer that throws cuts the transfer short (never a complete-looking
// one), HEAD gets the head alone, and a client that leaves mid-stream frees
// the worker.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "free_ports.h"
#include "http_server.h"

using namespace keyauth;

namespace {

constexpr int kPieces = 40;

HttpResponse handle(const HttpRequest &req, std::atomic<int> &made) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = "head;";
    if (req.path == "/plain") {
        r.stream = nullptr;
        return r;
    }
    const bool fails = req.path == "/fails";
    // /big: more than the kernel's buffers on both sides can hold
    const int count = req.path == "/big" ? 400 : kPieces;
    const size_t size = req.path == "/big" ? 65536 : 4000;
    auto left = std::make_shared<int>(count);
    r.stream = [left, fails, count, size, &made](std::string &piece) {
        if (*left == 0) return false;
        if (fails && *left == count / 2) throw std::runtime_error("the store went away");
        made++;
        piece = "piece " + std::to_string(count - (*left)--) + ";" + std::string(size, 'x') + "\n";
        return true;
    };
    return r;
}

class HttpStreamTest : public ::testing::Test {
protected:
    std::atomic<int> made{0};
    int port = keyauth::testing::free_ports(1)[0];
    HttpServer server{[this](const HttpRequest &r) { return handle(r, made); },
                      [] {
                          HttpServerLimits l;
                          l.workers = 1;  // a worker held by a stream would show
                          l.write_timeout = std::chrono::milliseconds(2000);
                          return l;
                      }(),
                      nullptr};
    std::thread loop;

    void SetUp() override {
        std::string error;
        ASSERT_TRUE(server.bind("127.0.0.1", port, error)) << error;
        loop = std::thread([this] { server.run(); });
    }
    void TearDown() override {
        if (!loop.joinable()) return;  // it never started (SetUp failed)
        std::raise(SIGTERM);           // the server's own way to stop
        loop.join();
    }

    int connect_to() {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
        return fd;
    }
    static void send_all(int fd, const std::string &s) {
        ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
    }
    // Reads until `done` says the bytes are whole, or the peer closes, or
    // 10 s pass.
    template <class Done>
    static std::string read_until(int fd, Done done) {
        std::string got;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!done(got) && std::chrono::steady_clock::now() < deadline) {
            pollfd p{fd, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            char buf[65536];
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, static_cast<size_t>(n));
        }
        return got;
    }
    static bool ends_chunked(const std::string &s) {
        return s.size() >= 5 && s.compare(s.size() - 5, 5, "0\r\n\r\n") == 0;
    }
    // The body of a chunked answer, and whether its last chunk came.
    static std::string dechunk(const std::string &raw, bool &whole) {
        whole = false;
        size_t at = raw.find("\r\n\r\n");
        if (at == std::string::npos) return "";
        at += 4;
        std::string body;
        while (at < raw.size()) {
            const size_t eol = raw.find("\r\n", at);
            if (eol == std::string::npos) break;
            const size_t n = std::stoul(raw.substr(at, eol - at), nullptr, 16);
            if (n == 0) {
                whole = raw.compare(eol, 4, "\r\n\r\n") == 0;
                break;
            }
            if (eol + 2 + n + 2 > raw.size()) break;
            body += raw.substr(eol + 2, n);
            at = eol + 2 + n + 2;
        }
        return body;
    }
};

TEST_F(HttpStreamTest, PiecesArriveAsChunksInOrderAndTheConnectionGoesOn) {
    int fd = connect_to();
    send_all(fd, "GET /report HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string raw = read_until(fd, ends_chunked);
    EXPECT_NE(raw.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << raw.substr(0, 300);
    EXPECT_EQ(raw.find("Content-Length"), std::string::npos);
    bool whole = false;
    const std::string body = dechunk(raw, whole);
    EXPECT_TRUE(whole);
    std::string want = "head;";
    for (int i = 0; i < kPieces; i++) want += "piece " + std::to_string(i) + ";" + std::string(4000, 'x') + "\n";
    EXPECT_EQ(body, want);
    EXPECT_EQ(made.load(), kPieces);

    // keep-alive: the same connection answers the next request
    send_all(fd, "GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string next = read_until(fd, [](const std::string &s) { return s.find("head;") != std::string::npos; });
    EXPECT_EQ(next.rfind("HTTP/1.1 200", 0), 0u) << next;
    close(fd);
}

TEST_F(HttpStreamTest, AProducerThatThrowsCutsTheTransferShort) {
    int fd = connect_to();
    send_all(fd, "GET /fails HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string raw = read_until(fd, ends_chunked);  // ends when the server closes
    EXPECT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u);
    bool whole = true;
    const std::string body = dechunk(raw, whole);
    EXPECT_FALSE(whole) << "a cut transfer must not end with the last chunk";
    EXPECT_EQ(body.rfind("head;piece 0;", 0), 0u);
    EXPECT_LT(made.load(), kPieces);
    close(fd);
}

TEST_F(HttpStreamTest, HeadGetsTheHeadAlone) {
    int fd = connect_to();
    send_all(fd, "HEAD /report HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string raw = read_until(fd, [](const std::string &) { return false; });  // until closed
    EXPECT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u);
    EXPECT_EQ(raw.substr(raw.find("\r\n\r\n") + 4), "");
    EXPECT_EQ(made.load(), 0) << "nothing is made for a HEAD";
    close(fd);
}

TEST_F(HttpStreamTest, AClientThatLeavesMidStreamFreesTheWorker) {
    int fd = connect_to();
    // a small receive window, never read: the server's writes stall
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    send_all(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    // the answer has begun
    read_until(fd, [](const std::string &s) { return s.find("piece 0;") != std::string::npos; });
    close(fd);
    // the only worker is free again: another request is answered
    int again = connect_to();
    send_all(again, "GET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    const std::string raw = read_until(again, [](const std::string &s) { return s.find("head;") != std::string::npos; });
    EXPECT_EQ(raw.rfind("HTTP/1.1 200", 0), 0u) << raw;
    EXPECT_LT(made.load(), 400) << "the producer stopped with the client";
    close(again);
}

}  // namespace
