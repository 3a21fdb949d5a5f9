#include "snapshot_fetch.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

#include "curl_easy.h"
#include "curl_global.h"
#include "sha256_stream.h"
#include "snapshot_service.h"

namespace keyauth::syncd {
namespace {

constexpr size_t kErrorBodyMax = 1024;

struct Transfer {
    CURL *curl = nullptr;
    int fd = -1;
    const std::atomic<bool> *stop = nullptr;
    Sha256Stream sha;
    uint64_t bytes = 0;
    long status = 0;
    std::string error_body;  // of an answer other than 200, for the log
    std::string write_error;
    std::optional<int64_t> revision;
    std::optional<uint64_t> cluster;
    std::optional<uint32_t> schema;
    std::optional<std::string> prefix;
    std::string checksum;  // the trailer's
};

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

bool same_name(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++) {
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
            return false;
        }
    }
    return true;
}

// Head fields and, after the body, the trailer's (libcurl passes both here).
size_t see_header(char *data, size_t size, size_t n, void *user) {
    auto *t = static_cast<Transfer *>(user);
    const std::string_view line(data, size * n);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return size * n;  // the status line, the blank one
    const std::string_view name = line.substr(0, colon), value = trimmed(line.substr(colon + 1));
    if (same_name(name, SnapshotService::kRevisionField)) t->revision = parse_decimal<int64_t>(value);
    if (same_name(name, SnapshotService::kClusterField)) t->cluster = parse_decimal<uint64_t>(value);
    if (same_name(name, SnapshotService::kSchemaField)) t->schema = parse_decimal<uint32_t>(value);
    if (same_name(name, SnapshotService::kPrefixField)) t->prefix = std::string(value);
    if (same_name(name, SnapshotService::kChecksumField)) t->checksum = std::string(value);
    return size * n;
}

size_t take_body(char *data, size_t size, size_t n, void *user) {
    auto *t = static_cast<Transfer *>(user);
    const size_t len = size * n;
    if (t->status == 0) curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
    if (t->status != 200) {  // a refusal's JSON, kept short for the log
        t->error_body.append(data, std::min(len, kErrorBodyMax - std::min(kErrorBodyMax, t->error_body.size())));
        return len;
    }
    for (size_t done = 0; done < len;) {
        const ssize_t w = ::write(t->fd, data + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            t->write_error = std::string("cannot write the copy: ") + std::strerror(errno);
            return 0;  // libcurl ends the transfer
        }
        done += static_cast<size_t>(w);
    }
    t->sha.add(std::string_view(data, len));
    t->bytes += len;
    return len;
}

int progress(void *user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Transfer *>(user)->stop->load() ? 1 : 0;
}

}  // namespace

bool fetch_snapshot(const std::string &url, const std::string &file, mode_t mode, const std::atomic<bool> &stop,
                    const SnapshotFetchLimits &limits, FetchedSnapshot &out, std::string &error) {
    if (!curl_global_ready()) {
        error = "libcurl could not be initialised";
        return false;
    }
    Transfer t;
    t.stop = &stop;
    t.fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (t.fd < 0) {
        error = "cannot create " + file + ": " + std::strerror(errno);
        return false;
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{t.fd};
    CurlEasy handle(curl_easy_init());
    if (!handle) {
        error = "libcurl could not allocate a handle";
        return false;
    }
    CURL *e = t.curl = handle.get();
    char buffer[CURL_ERROR_SIZE] = {};
    curl_guard_transfer(e, buffer, std::chrono::hours(24));  // no proxy, no redirect; stalls end it sooner
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(limits.connect.count()));
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, limits.min_bytes_per_second);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(limits.stall.count()));
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, see_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024);  // libcurl's largest: fewer writes and hash calls
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, take_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    const CURLcode code = curl_easy_perform(e);
    if (t.status == 0) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &t.status);
    if (!t.write_error.empty()) {
        error = t.write_error;
        return false;
    }
    if (code != CURLE_OK) {
        error = std::string("transfer failed after ") + std::to_string(t.bytes) +
                " bytes: " + (buffer[0] != '\0' ? buffer : curl_easy_strerror(code));
        return false;
    }
    if (t.status != 200) {
        error = "the peer answered " + std::to_string(t.status) + ": " + std::string(trimmed(t.error_body));
        return false;
    }
    if (!t.revision || !t.cluster || !t.schema || !t.prefix || *t.revision < 0) {
        error = "the answer lacks its Keyauth-Revision, Keyauth-Cluster-Id, Keyauth-Schema-Version or "
                "Keyauth-Etcd-Prefix";
        return false;
    }
    if (t.checksum.empty()) {
        error = "the transfer ended without its checksum (cut short?)";
        return false;
    }
    if (const std::string got = t.sha.hex(); got != t.checksum) {
        error = "checksum mismatch: the peer sent " + t.checksum + ", " + std::to_string(t.bytes) +
                " bytes arrived with " + got;
        return false;
    }
    if (::fsync(t.fd) != 0) {
        error = std::string("cannot sync the copy: ") + std::strerror(errno);
        return false;
    }
    out.head = SnapshotHead{*t.revision, *t.cluster, *t.schema};
    out.prefix = *t.prefix;
    out.bytes = t.bytes;
    return true;
}

}  // namespace keyauth::syncd
