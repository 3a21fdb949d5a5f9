#include "github_keys.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "http_get.h"
#include "strict_json.h"

namespace keyauth {
namespace {

using nlohmann::json;

// The list is small (two or three keys); GitHub's answer is bounded well
// above it, and so is a file.
constexpr size_t kMaxListBytes = 1 << 20;

// The file's whole text if it is at most kMaxListBytes.
bool read_list_file(const std::string &path, std::string &out, std::string &error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        error = "file: cannot open " + path + ": " + std::strerror(errno);
        return false;
    }
    out.assign(kMaxListBytes + 1, '\0');
    in.read(out.data(), static_cast<std::streamsize>(out.size()));
    if (in.bad()) {
        error = "file: cannot read " + path;
        return false;
    }
    out.resize(static_cast<size_t>(in.gcount()));
    if (out.size() > kMaxListBytes) {
        error = "file: " + path + " is over " + std::to_string(kMaxListBytes) + " bytes";
        return false;
    }
    return true;
}

bool fetch_list(const GithubKeysOptions &options, std::string &out, std::string &error) {
    HttpGetOptions get;
    get.timeout = options.fetch_timeout;
    get.max_body_bytes = kMaxListBytes;
    HttpGetResult answer = http_get(options.url, get);
    if (answer.status == 0) {
        error = std::move(answer.error);
        return false;
    }
    if (answer.status != 200) {
        error = "http: status " + std::to_string(answer.status);
        return false;
    }
    out = std::move(answer.body);
    return true;
}

}  // namespace

bool parse_github_keys(std::string_view text, std::vector<GithubPublicKey> &out, std::string &error) {
    out.clear();
    std::string duplicate;
    const json doc = parse_json_strict(text, duplicate);
    if (doc.is_discarded()) {
        error = "the list is not JSON";
        return false;
    }
    if (!duplicate.empty()) {
        error = "a member name repeats within an object";
        return false;
    }
    const auto keys = doc.is_object() ? doc.find("public_keys") : doc.end();
    if (!doc.is_object() || keys == doc.end() || !keys->is_array()) {
        error = "the list has no \"public_keys\" array";
        return false;
    }
    for (const json &entry : *keys) {
        if (!entry.is_object()) continue;
        const auto id = entry.find("key_identifier");
        const auto key = entry.find("key");
        if (id == entry.end() || key == entry.end() || !id->is_string() || !key->is_string()) continue;
        GithubPublicKey k;
        k.key_identifier = id->get<std::string>();
        k.key_pem = key->get<std::string>();
        if (k.key_identifier.empty() || k.key_identifier.size() > kMaxGithubKeyIdentifierBytes ||
            k.key_pem.size() > kMaxPublicKeyPemBytes) {
            continue;
        }
        const auto current = entry.find("is_current");
        k.is_current = current != entry.end() && current->is_boolean() && current->get<bool>();
        out.push_back(std::move(k));
    }
    if (out.empty()) {
        error = "the list holds no usable key";
        return false;
    }
    return true;
}

const char *signature_verdict_name(SignatureVerdict verdict) {
    switch (verdict) {
    case SignatureVerdict::kValid: return "valid";
    case SignatureVerdict::kBadSignature: return "bad_signature";
    case SignatureVerdict::kUnknownKey: return "unknown_key";
    case SignatureVerdict::kUnavailable: return "unavailable";
    }
    return "unavailable";
}

GithubKeys::GithubKeys(GithubKeysOptions options) : options_(std::move(options)) {}

int64_t GithubKeys::now_ms() const {
    if (options_.clock) return options_.clock();
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool GithubKeys::load(KeyMap &out, std::string &error) const noexcept {
    try {
        std::string text;
        const bool read = options_.file.empty() ? fetch_list(options_, text, error)
                                                : read_list_file(options_.file, text, error);
        if (!read) return false;
        std::vector<GithubPublicKey> list;
        if (!parse_github_keys(text, list, error)) return false;
        for (GithubPublicKey &k : list) {
            out.emplace(std::move(k.key_identifier), EcdsaP256PublicKey::from_pem(k.key_pem));
        }
        return true;
    } catch (...) {  // std::bad_alloc
        error = "out of memory";
        return false;
    }
}

std::shared_ptr<const GithubKeys::KeyMap> GithubKeys::keys_for(std::string_view key_identifier) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        if (keys_ && keys_->find(key_identifier) != keys_->end()) return keys_;
        if (fetching_) {
            // another verification is bringing a list: it may hold this key
            fetch_done_.wait(lock);
            continue;
        }
        const int64_t since = now_ms() - last_attempt_ms_;
        const int64_t min_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.min_refetch).count();
        // a clock set back (since < 0) does not hold fetches off until it catches up
        if (attempted_ && since >= 0 && since < min_ms) return keys_;
        break;
    }
    fetching_ = true;
    attempted_ = true;
    last_attempt_ms_ = now_ms();
    ++fetches_;
    lock.unlock();

    KeyMap fresh;
    std::string error;
    const bool ok = load(fresh, error);
    std::shared_ptr<const KeyMap> brought;
    if (ok) {
        try {
            brought = std::make_shared<const KeyMap>(std::move(fresh));
        } catch (...) {  // std::bad_alloc: as if the fetch had failed
            error = "out of memory";
        }
    }

    lock.lock();
    fetching_ = false;
    if (brought) {
        keys_ = std::move(brought);
    } else {
        ++failures_;
        last_error_.swap(error);
    }
    fetch_done_.notify_all();
    return keys_;
}

SignatureVerdict GithubKeys::verify(std::string_view key_identifier, std::string_view signature_base64,
                                    std::string_view body) {
    if (key_identifier.empty() || key_identifier.size() > kMaxGithubKeyIdentifierBytes || signature_base64.empty()) {
        return SignatureVerdict::kBadSignature;
    }
    try {
        const std::shared_ptr<const KeyMap> keys = keys_for(key_identifier);
        if (!keys) return SignatureVerdict::kUnavailable;
        const auto it = keys->find(key_identifier);
        if (it == keys->end()) return SignatureVerdict::kUnknownKey;
        const bool valid = it->second != nullptr && it->second->verify(signature_base64, body);
        return valid ? SignatureVerdict::kValid : SignatureVerdict::kBadSignature;
    } catch (...) {  // std::system_error from the mutex: nothing could be checked
        return SignatureVerdict::kUnavailable;
    }
}

uint64_t GithubKeys::fetches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return fetches_;
}

uint64_t GithubKeys::fetch_failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
}

std::string GithubKeys::last_fetch_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
}

}  // namespace keyauth
