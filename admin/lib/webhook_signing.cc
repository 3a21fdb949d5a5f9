#include "webhook_signing.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace keyauth {
namespace {

constexpr char kHex[] = "0123456789abcdef";
constexpr std::string_view kDerivation = "keyauth webhook signing secret v1:";

std::array<unsigned char, 32> hmac_sha256(const unsigned char *key, size_t key_len, std::string_view a,
                                          std::string_view b = {}) {
    std::array<unsigned char, 32> out{};
    unsigned int len = 0;
    const std::string message = std::string(a) + std::string(b);
    if (!HMAC(EVP_sha256(), key, static_cast<int>(key_len), reinterpret_cast<const unsigned char *>(message.data()),
              message.size(), out.data(), &len) ||
        len != out.size()) {
        throw std::runtime_error("HMAC-SHA256 failed");
    }
    return out;
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

}  // namespace

std::optional<WebhookKey> load_webhook_key(const std::string &path, std::string &error) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        error = path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    struct stat st {};
    char text[66] = {};
    const ssize_t n = fstat(fd, &st) == 0 ? read(fd, text, sizeof text) : -1;
    close(fd);
    if (n < 0) {
        error = path + ": cannot be read";
        return std::nullopt;
    }
    if ((st.st_mode & 077) != 0) {
        error = path + ": others than its owner may read it (chmod 600)";
        return std::nullopt;
    }
    WebhookKey key{};
    const bool newline = n == 65 && text[64] == '\n';
    if (n != 64 && !newline) {
        error = path + ": not a webhook key (64 hex digits)";
        return std::nullopt;
    }
    for (size_t i = 0; i < key.size(); i++) {
        const int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            error = path + ": not a webhook key (64 hex digits)";
            return std::nullopt;
        }
        key[i] = static_cast<unsigned char>(hi << 4 | lo);
    }
    return key;
}

std::optional<WebhookKey> load_or_make_webhook_key(const std::string &path, std::string &error) {
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        // made by root (an operator's sudo keyauthctl): the store's owner,
        // the one that sends, must read it
        struct stat dir {};
        const std::string parent = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
        if (geteuid() == 0 && stat(parent.empty() ? "/" : parent.c_str(), &dir) == 0 && dir.st_uid != 0 &&
            fchown(fd, dir.st_uid, dir.st_gid) != 0) {
            close(fd);
            unlink(path.c_str());
            error = path + ": cannot give it to the store's owner: " + std::strerror(errno);
            return std::nullopt;
        }
        WebhookKey key{};
        std::string text;
        bool ok = RAND_bytes(key.data(), static_cast<int>(key.size())) == 1;
        for (unsigned char b : key) {
            text.push_back(kHex[b >> 4]);
            text.push_back(kHex[b & 15]);
        }
        text.push_back('\n');
        ok = ok && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
        close(fd);
        if (!ok) {
            unlink(path.c_str());
            error = path + ": cannot make a webhook key";
            return std::nullopt;
        }
    } else if (errno != EEXIST) {
        error = path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    return load_webhook_key(path, error);
}

std::string default_webhook_key_file(const std::string &db) { return db + "/webhook.key"; }

WebhookSecret webhook_secret(const WebhookKey &key, const Id &webhook) {
    return hmac_sha256(key.data(), key.size(), kDerivation,
                       std::string_view(reinterpret_cast<const char *>(webhook.data()), webhook.size()));
}

std::string base64_encode(const unsigned char *data, size_t len) {
    std::string out(4 * ((len + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char *>(out.data()), data, static_cast<int>(len));
    out.resize(static_cast<size_t>(n));
    return out;
}

std::string webhook_secret_text(const WebhookSecret &secret) {
    return "whsec_" + base64_encode(secret.data(), secret.size());
}

std::string webhook_signature(const WebhookSecret &secret, std::string_view message_id, int64_t timestamp_s,
                              std::string_view body) {
    const std::string head = std::string(message_id) + "." + std::to_string(timestamp_s) + ".";
    const auto mac = hmac_sha256(secret.data(), secret.size(), head, body);
    return "v1," + base64_encode(mac.data(), mac.size());
}

}  // namespace keyauth
