// GET /snapshot end to end through the real HttpServer on a loopback port
// (SnapshotService, snapshot_service.h) and its client (fetch_snapshot,
// snapshot_fetch.h). The copy process is a shell script here, so that each
// way a copy can go (whole, failing, endless, slow, no head) is at hand;
// the real copy is snapshot_copy_test's and t/69's.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "free_ports.h"
#include "http_server.h"
#include "ip_allowlist.h"
#include "sha256_stream.h"
#include "snapshot_fetch.h"
#include "snapshot_service.h"
#include "syncd_fixtures.h"
#include "temp_dir.h"

using namespace keyauth;
using namespace keyauth::syncd;
namespace kt = keyauth::testing;

namespace {

const std::string kBody(300000, 'a');

// Run as `copier --snapshot-copy DB`: does what the file DB/../mode says.
const char kCopier[] = R"(#!/bin/sh
mode=$(cat "$(dirname "$2")/mode")
case "$mode" in
whole)   printf 'keyauth-snapshot 5 7 3\n'; head -c 300000 /dev/zero | tr '\0' a ;;
fails)   printf 'keyauth-snapshot 5 7 3\n'; printf abc; exit 1 ;;
endless) printf 'keyauth-snapshot 5 7 3\n'; exec cat /dev/zero ;;
slow)    printf 'keyauth-snapshot 5 7 3\n'; printf abc; sleep 3 ;;
nohead)  echo 'no store here' ;;
esac
)";

std::string packed(const std::string &cidr) {
    std::string p, error;
    if (!pack_allowed_ips({cidr}, p, error)) throw std::runtime_error(error);
    return p;
}

std::string sha_hex(const std::string &s) {
    Sha256Stream sha;
    sha.add(s);
    return sha.hex();
}

std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

class SnapshotHttpTest : public ::testing::Test {
protected:
    kt::TempDir dir;
    Metrics metrics{std::chrono::seconds(10)};
    std::string allowed = packed("127.0.0.0/8");
    std::unique_ptr<SnapshotService> service;
    // a handler of the test's own instead of the service, when set
    std::function<HttpResponse(const HttpRequest &)> custom;
    int port = keyauth::testing::free_ports(1)[0];
    std::unique_ptr<HttpServer> server;
    std::thread loop;
    std::atomic<bool> stop{false};
    SnapshotFetchLimits limits;

    void SetUp() override {
        const std::string copier = dir.sub("copier");
        std::ofstream(copier) << kCopier;
        ::chmod(copier.c_str(), 0755);
        mode("whole");
        metrics.set_applied(5);  // healthy
        metrics.current();
        service = std::make_unique<SnapshotService>(dir.sub("db"), "/keyauth/1", allowed, copier, metrics);
        HttpServerLimits l;
        l.workers = 2;
        l.write_timeout = std::chrono::milliseconds(1000);
        server = std::make_unique<HttpServer>(
            [this](const HttpRequest &r) { return custom ? custom(r) : service->handle(r); }, l, nullptr);
        std::string error;
        ASSERT_TRUE(server->bind("127.0.0.1", port, error)) << error;
        loop = std::thread([this] { server->run(); });
        limits.stall = std::chrono::seconds(1);
    }
    void TearDown() override {
        if (!loop.joinable()) return;
        std::raise(SIGTERM);
        loop.join();
    }
    void mode(const std::string &m) { std::ofstream(dir.sub("mode")) << m; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port) + "/snapshot"; }
    // fetch_snapshot into a new file each time
    bool fetch(FetchedSnapshot &got, std::string &error, std::string *body = nullptr) {
        static int n = 0;
        const std::string file = dir.sub("got" + std::to_string(++n));
        const bool ok = fetch_snapshot(url(), file, 0640, stop, limits, got, error);
        if (body) *body = read_file(file);
        return ok;
    }
};

}  // namespace

TEST_F(SnapshotHttpTest, AWholeCopyArrivesVerifiedWithItsHead) {
    FetchedSnapshot got;
    std::string error, body;
    ASSERT_TRUE(fetch(got, error, &body)) << error;
    EXPECT_EQ(body, kBody);
    EXPECT_EQ(got.bytes, kBody.size());
    EXPECT_EQ(got.head.revision, 5);
    EXPECT_EQ(got.head.cluster_id, 7u);
    EXPECT_EQ(got.head.schema_version, 3u);
    EXPECT_EQ(got.prefix, "/keyauth/1");
    EXPECT_TRUE(kt::wait_until([&] { return metrics.text().find("keyauth_syncd_snapshots_served_total 1\n") !=
                                            std::string::npos; },
                               std::chrono::seconds(5)));
    // one at a time, but one after another
    ASSERT_TRUE(fetch(got, error)) << error;
}

TEST_F(SnapshotHttpTest, ACopyThatFailsCutsTheTransferShort) {
    mode("fails");
    FetchedSnapshot got;
    std::string error;
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("transfer failed"), std::string::npos) << error;
}

// An answer of the test's own: `body` whole in one piece, with the head
// fields when `head`, and a trailer giving `checksum` unless it is empty.
HttpResponse crafted(const std::string &body, bool head, const std::string &checksum) {
    HttpResponse r;
    r.content_type = "application/octet-stream";
    if (head) {
        r.headers = {{"Keyauth-Revision", "5"},
                     {"Keyauth-Cluster-Id", "7"},
                     {"Keyauth-Schema-Version", "3"},
                     {"Keyauth-Etcd-Prefix", "/keyauth/1"}};
    }
    r.body = body;
    r.stream = [](std::string &) { return false; };
    if (!checksum.empty()) {
        r.trailer = [checksum] {
            return std::vector<std::pair<std::string, std::string>>{{SnapshotService::kChecksumField, checksum}};
        };
    }
    return r;
}

TEST_F(SnapshotHttpTest, AChangedByteOrAMissingChecksumIsRefused) {
    FetchedSnapshot got;
    std::string error;
    custom = [](const HttpRequest &) { return crafted("abd", true, sha_hex("abc")); };
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("checksum mismatch"), std::string::npos) << error;

    custom = [](const HttpRequest &) { return crafted("abc", true, ""); };
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("without its checksum"), std::string::npos) << error;

    custom = [](const HttpRequest &) { return crafted("abc", false, sha_hex("abc")); };  // no head fields
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("lacks"), std::string::npos) << error;

    custom = [](const HttpRequest &) { return crafted("abc", true, sha_hex("abc")); };  // the control
    EXPECT_TRUE(fetch(got, error)) << error;
}

TEST_F(SnapshotHttpTest, OneCopyAtATimeAndAStalledClientIsDropped) {
    mode("endless");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    const std::string get = "GET /snapshot HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(send(fd, get.data(), get.size(), MSG_NOSIGNAL), static_cast<ssize_t>(get.size()));
    // the head, then nothing more read
    std::string head;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (head.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
        char c;
        if (recv(fd, &c, 1, 0) != 1) break;
        head += c;
    }
    ASSERT_NE(head.find("200 OK"), std::string::npos) << head;
    HttpRequest second;
    second.method = "GET";
    second.path = "/snapshot";
    second.client_address = "127.0.0.1";
    const HttpResponse busy = service->handle(second);
    EXPECT_EQ(busy.status, 429) << "a second copy while the first is sent";
    EXPECT_NE(busy.body.find("SNAPSHOT_BUSY"), std::string::npos);
    FetchedSnapshot got;
    std::string error;
    mode("whole");
    // dropped within the write timeout (1 s), its copy process killed:
    // then a copy goes out again
    EXPECT_TRUE(kt::wait_until([&] { return fetch(got, error); }, std::chrono::seconds(10))) << error;
    EXPECT_NE(metrics.text().find("keyauth_syncd_snapshots_failed_total 1\n"), std::string::npos);
    EXPECT_NE(metrics.text().find("keyauth_syncd_snapshot_refusals_total{reason=\"busy\"} "), std::string::npos);
    ::close(fd);
}

TEST_F(SnapshotHttpTest, APeerThatStallsIsGivenUp) {
    mode("slow");
    FetchedSnapshot got;
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("transfer failed"), std::string::npos) << error;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3)) << "the stall limit, not the peer";
}

TEST_F(SnapshotHttpTest, RefusalsSayWhy) {
    FetchedSnapshot got;
    std::string error;
    mode("nohead");
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("answered 503"), std::string::npos) << error;

    mode("whole");
    Metrics fresh;  // no complete store yet
    SnapshotService not_ready(dir.sub("db"), "/keyauth/1", allowed, dir.sub("copier"), fresh);
    custom = [&](const HttpRequest &r) { return not_ready.handle(r); };
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("answered 503"), std::string::npos) << error;
    EXPECT_NE(error.find("NOT_READY"), std::string::npos) << error;

    SnapshotService elsewhere(dir.sub("db"), "/keyauth/1", packed("10.0.0.0/8"), dir.sub("copier"), metrics);
    custom = [&](const HttpRequest &r) { return elsewhere.handle(r); };
    EXPECT_FALSE(fetch(got, error));
    EXPECT_NE(error.find("answered 403"), std::string::npos) << error;

    custom = nullptr;
    HttpRequest r;
    r.client_address = "127.0.0.1";
    r.method = "GET";
    r.path = "/metrics";
    EXPECT_EQ(service->handle(r).status, 404);
    r.path = "/snapshot";
    r.method = "POST";
    EXPECT_EQ(service->handle(r).status, 405);

    stop = true;  // syncd stopping: the transfer is abandoned
    EXPECT_FALSE(fetch(got, error));
    stop = false;
    // a file already there is never written over
    const std::string file = dir.sub("exists");
    std::ofstream(file) << "mine";
    EXPECT_FALSE(fetch_snapshot(url(), file, 0640, stop, limits, got, error));
    EXPECT_EQ(read_file(file), "mine");
}
