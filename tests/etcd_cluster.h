// Real etcd members on loopback for tests (no mocks): N members of one
// cluster on free ports, each in its own data directory under a fresh
// temporary directory, started with the settings of docs/scale-out.md and
// waited for (health, with a deadline). Members can be killed (SIGKILL),
// stopped (SIGSTOP: alive but silent, as if cut off), resumed and
// restarted. Every member is killed when the object goes, and also if the
// test process dies first (PR_SET_PDEATHSIG), so no test leaves one behind.
#pragma once

#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "free_ports.h"
#include "temp_dir.h"
#include "test_certs.h"

namespace keyauth::testing {

// Files for a cluster that speaks TLS to its clients and wants their
// certificates (make_test_certs writes a throwaway set).
using EtcdTls = TestCerts;

struct EtcdClusterOptions {
    std::vector<std::string> extra_args;  // more etcd flags, for every member
    std::optional<EtcdTls> tls;           // https:// client URLs, client certificates required
    std::chrono::seconds timeout{60};     // to start and become healthy
};

class EtcdCluster {
public:
    static constexpr const char *kEtcd = "/usr/bin/etcd";

    // Starts `members` members and waits until each reports healthy, within
    // the timeout. ok() says whether it worked; error() why not.
    explicit EtcdCluster(int members, EtcdClusterOptions options = EtcdClusterOptions())
        : options_(std::move(options)) {
        std::chrono::seconds timeout = options_.timeout;
        if (access(kEtcd, X_OK) != 0) {
            error_ = std::string(kEtcd) + " is missing: run 'make deps' (etcd-server)";
            return;
        }
        // a port picked free can be taken by someone else before etcd binds
        // it: then the whole cluster starts again on new ports
        for (int attempt = 0; attempt < 3 && !ok_; ++attempt) {
            kill_all();
            ok_ = start(members, attempt, timeout);
        }
    }

    ~EtcdCluster() { kill_all(); }
    EtcdCluster(const EtcdCluster &) = delete;
    EtcdCluster &operator=(const EtcdCluster &) = delete;

    bool ok() const { return ok_; }
    const std::string &error() const { return error_; }
    int size() const { return static_cast<int>(members_.size()); }

    std::string endpoint(int i) const {
        return (options_.tls ? "https" : "http") + std::string("://127.0.0.1:") +
               std::to_string(members_[i].client_port);
    }
    std::vector<std::string> endpoint_list() const {
        std::vector<std::string> out;
        for (int i = 0; i < size(); ++i) out.push_back(endpoint(i));
        return out;
    }
    std::string endpoints() const {  // "http://127.0.0.1:A,http://127.0.0.1:B"
        std::string out;
        for (int i = 0; i < size(); ++i) out += (i ? "," : "") + endpoint(i);
        return out;
    }
    int index_of(const std::string &endpoint_url) const {
        for (int i = 0; i < size(); ++i) {
            if (endpoint(i) == endpoint_url) return i;
        }
        return -1;
    }
    pid_t pid(int i) const { return members_[i].pid; }

    void kill(int i) {
        Member &m = members_[i];
        if (m.pid <= 0) return;
        ::kill(m.pid, SIGKILL);
        waitpid(m.pid, nullptr, 0);
        m.pid = -1;
    }
    // Returns once every thread of the member is stopped (kill() only queues
    // the signal: a busy machine could let an in-flight request through).
    void stop(int i) {
        signal_member(i, SIGSTOP);
        if (members_[i].pid <= 0) return;
        const std::string tasks = "/proc/" + std::to_string(members_[i].pid) + "/task";
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (std::chrono::steady_clock::now() < deadline && !all_stopped(tasks))
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    void resume(int i) { signal_member(i, SIGCONT); }

    // A killed member again, on its ports and data (it rejoins the cluster).
    bool restart(int i, std::chrono::seconds timeout = std::chrono::seconds(30)) {
        kill(i);
        if (!launch(i)) return false;
        return wait_healthy(i, timeout);
    }

    // `etcdctl snapshot save` from member 0 into `file`.
    bool save_snapshot(const std::string &file) {
        return run_etcdctl("--endpoints=" + endpoint(0) + " snapshot save " + file, "snapshot save");
    }

    // What an operator does to roll a whole cluster back: every member
    // stopped, `etcdctl snapshot restore` into a new data directory for each
    // (same names, peers and token, so the same cluster id), started again.
    bool restore_snapshot(const std::string &file, std::chrono::seconds timeout = std::chrono::seconds(30)) {
        kill_all();
        std::string cluster;
        for (int j = 0; j < size(); ++j) cluster += (j ? "," : "") + name(j) + "=" + peer_url(j);
        for (int i = 0; i < size(); ++i) {
            const std::string data = dir_.sub(name(i) + ".etcd");
            std::error_code ec;
            std::filesystem::remove_all(data, ec);
            if (!run_etcdctl("snapshot restore " + file + " --name=" + name(i) + " --data-dir=" + data +
                                 " --initial-cluster=" + cluster + " --initial-cluster-token=" + token_ +
                                 " --initial-advertise-peer-urls=" + peer_url(i),
                             "snapshot restore")) {
                return false;
            }
        }
        for (int i = 0; i < size(); ++i) {
            if (!launch(i)) return false;
        }
        for (int i = 0; i < size(); ++i) {
            if (!wait_healthy(i, timeout)) return false;
        }
        return true;
    }

    // Polls GET /health until it says true or the timeout passes.
    bool wait_healthy(int i, std::chrono::milliseconds timeout) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            if (healthy(i)) return true;
            if (members_[i].pid > 0 && waitpid(members_[i].pid, nullptr, WNOHANG) == members_[i].pid) {
                members_[i].pid = -1;
                error_ = "etcd member " + std::to_string(i) + " exited:\n" + log_tail(i);
                return false;
            }
            if (std::chrono::steady_clock::now() >= deadline) {
                error_ = "etcd member " + std::to_string(i) + " not healthy within " +
                         std::to_string(timeout.count()) + " ms:\n" + log_tail(i);
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }

    bool healthy(int i) const {
        std::string body;
        CURL *e = curl_easy_init();
        if (e == nullptr) return false;
        std::string url = endpoint(i) + "/health";
        curl_easy_setopt(e, CURLOPT_URL, url.c_str());
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 1000L);
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, +[](char *p, size_t s, size_t n, void *u) {
            static_cast<std::string *>(u)->append(p, s * n);
            return s * n;
        });
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
        if (options_.tls) {
            curl_easy_setopt(e, CURLOPT_CAINFO, options_.tls->ca_file.c_str());
            curl_easy_setopt(e, CURLOPT_SSLCERT, options_.tls->client_cert.c_str());
            curl_easy_setopt(e, CURLOPT_SSLKEY, options_.tls->client_key.c_str());
        }
        CURLcode rc = curl_easy_perform(e);
        curl_easy_cleanup(e);
        return rc == CURLE_OK && body.find("\"health\":\"true\"") != std::string::npos;
    }

    std::string log_tail(int i, size_t bytes = 3000) const {
        std::ifstream in(dir_.sub("m" + std::to_string(i) + ".log"));
        std::stringstream s;
        s << in.rdbuf();
        std::string all = s.str();
        return all.size() > bytes ? all.substr(all.size() - bytes) : all;
    }

    const std::string &dir() const { return dir_.path(); }

    // A throwaway CA, server and client certificate (test_certs.h).
    static bool make_test_certs(const std::string &dir, EtcdTls &out, std::string &error) {
        return keyauth::testing::make_test_certs(dir, out, error);
    }

private:
    struct Member {
        int client_port = 0;
        int peer_port = 0;
        pid_t pid = -1;
    };

    static bool all_stopped(const std::string &tasks) {
        std::error_code ec;
        for (const auto &t : std::filesystem::directory_iterator(tasks, ec)) {
            std::ifstream f(t.path() / "stat");
            std::string line;
            std::getline(f, line);
            const size_t paren = line.rfind(')');
            if (paren == std::string::npos || paren + 2 >= line.size()) continue;  // gone
            const char state = line[paren + 2];
            if (state != 'T' && state != 't') return false;
        }
        return !ec;
    }

    void signal_member(int i, int sig) {
        if (members_[i].pid > 0) ::kill(members_[i].pid, sig);
    }

    void kill_all() {
        for (int i = 0; i < size(); ++i) kill(i);
    }

    bool start(int count, int attempt, std::chrono::seconds timeout) {
        members_.assign(count, Member{});
        for (int i = 0; i < count; ++i) {  // a failed attempt's data would keep its ports
            std::error_code ec;
            std::filesystem::remove_all(dir_.sub(name(i) + ".etcd"), ec);
        }
        std::vector<int> ports = free_ports(2 * count);
        for (int i = 0; i < count; ++i) {
            members_[i].client_port = ports[2 * i];
            members_[i].peer_port = ports[2 * i + 1];
        }
        token_ = "keyauth-test-" + std::to_string(getpid()) + "-" + std::to_string(attempt);
        for (int i = 0; i < count; ++i) {
            if (!launch(i)) return false;
        }
        for (int i = 0; i < count; ++i) {
            if (!wait_healthy(i, timeout)) return false;
        }
        return true;
    }

    std::vector<std::string> args_of(int i) const {
        std::string cluster;
        for (int j = 0; j < size(); ++j) {
            cluster += (j ? "," : "") + name(j) + "=" + peer_url(j);
        }
        std::vector<std::string> a = {
            kEtcd,
            "--name=" + name(i),
            "--data-dir=" + dir_.sub(name(i) + ".etcd"),
            "--listen-client-urls=" + endpoint(i),
            "--advertise-client-urls=" + endpoint(i),
            "--listen-peer-urls=" + peer_url(i),
            "--initial-advertise-peer-urls=" + peer_url(i),
            "--initial-cluster=" + cluster,
            "--initial-cluster-state=new",
            "--initial-cluster-token=" + token_,
            // the settings of docs/scale-out.md
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=24h",
            "--quota-backend-bytes=8589934592",
            "--experimental-watch-progress-notify-interval=1s",
            "--logger=zap",
        };
        if (options_.tls) {
            a.push_back("--client-cert-auth");
            a.push_back("--trusted-ca-file=" + options_.tls->ca_file);
            a.push_back("--cert-file=" + options_.tls->server_cert);
            a.push_back("--key-file=" + options_.tls->server_key);
        }
        a.insert(a.end(), options_.extra_args.begin(), options_.extra_args.end());
        return a;
    }

    bool launch(int i) {
        std::vector<std::string> args = args_of(i);
        std::vector<char *> argv;
        for (std::string &s : args) argv.push_back(s.data());
        argv.push_back(nullptr);
        std::string log = dir_.sub(name(i) + ".log");
        int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            error_ = "cannot open " + log;
            return false;
        }
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid == 0) {
            // only async-signal-safe calls between fork and exec
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(127);
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            execv(argv[0], argv.data());
            _exit(127);
        }
        close(fd);
        if (pid < 0) {
            error_ = "fork failed";
            return false;
        }
        members_[i].pid = pid;
        return true;
    }

    bool run_etcdctl(const std::string &args, const char *what) {
        const std::string log = dir_.sub("etcdctl.log");
        const std::string cmd = "ETCDCTL_API=3 /usr/bin/etcdctl " + args + " >>" + log + " 2>&1";
        if (std::system(cmd.c_str()) == 0) return true;
        error_ = std::string(what) + " failed: see " + log;
        return false;
    }

    std::string name(int i) const { return "m" + std::to_string(i); }
    std::string peer_url(int i) const {
        return "http://127.0.0.1:" + std::to_string(members_[i].peer_port);
    }

    TempDir dir_;
    EtcdClusterOptions options_;
    std::vector<Member> members_;
    std::string token_;
    bool ok_ = false;
    std::string error_;
};

}  // namespace keyauth::testing
