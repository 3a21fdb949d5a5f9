// What reaches /v1/secret-scanning/github from anyone, and what the key list
// fetch brings back (issue #47): the bytes as a leak report, as GitHub's key
// list, as a body under a fixed key's signature, as the signature (its
// base64 text, and its DER bytes) and as the PEM key. Never a crash; a
// refused report's error is one of the fixed sentences (so never any part of
// a token); an accepted one keeps its bounds; only the signed message itself
// verifies under its signature.
#include <string>
#include <string_view>
#include <vector>

#include "ecdsa_signature.h"
#include "etcd_codec.h"
#include "github_keys.h"
#include "leak_report.h"

namespace {

// A P-256 key made for this fuzzer (its private half was not kept), and its
// signature over kMessage (also the seed fuzz/corpus/leak_report/report).
constexpr std::string_view kPublicKeyPem =
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE9AT0tiZynTXUWLquDXGu4tgXN9ys\n"
    "EhqY7z5nde4zXpNWsS8nkfM2HjmvncP8KZ8uy1K/Q0uXvCdSZ2qMKy17eg==\n"
    "-----END PUBLIC KEY-----\n";
constexpr std::string_view kMessage =
    R"([{"token":"kZ9qX3vW7pL2mN8rT4yB6hJ5","type":"keyauth_api_key","url":"https://github.com/o/r/blob/1/f",)"
    R"("source":"content"}])";
constexpr std::string_view kSignature =
    "MEQCIHC0rAfgvqqhmgaW93AkHb/Q8Hr4RgeZYG6aYKImGRW4AiB12nq+yy/FiPDRjKwlb/8sVqk8lzsno7rWFIXA8vnUiw==";

bool one_of(std::string_view s, const std::vector<std::string_view> &allowed) {
    for (std::string_view a : allowed) {
        if (s == a) return true;
    }
    return false;
}

// "entry <n>" and one of the fixed endings, or one of the whole sentences.
bool fixed_sentence(std::string_view error) {
    if (error.substr(0, 6) == "entry ") {
        size_t i = 6;
        while (i < error.size() && error[i] >= '0' && error[i] <= '9') ++i;
        if (i == 6 || i - 6 > 4) return false;
        return one_of(error.substr(i), {" is not an object", " has no token", ": token is not a string",
                                        ": token is empty", ": token is over 256 bytes", ": type is not a string",
                                        ": type is over 128 bytes", ": url is not a string",
                                        ": url is over 2048 bytes", ": source is not a string",
                                        ": source is over 128 bytes"});
    }
    return one_of(error, {"the report is over 1 MiB", "the report holds over 1000 entries",
                          "the report nests deeper than 32 levels", "the report is not JSON",
                          "a member name repeats within an object", "the report is not a JSON array",
                          "out of memory"});
}

void check_report(std::string_view in) {
    const keyauth::LeakReport r = keyauth::parse_leak_report(in);
    if (r.status == keyauth::LeakReportStatus::kOk) {
        if (!r.error.empty() || r.tokens.size() > keyauth::kMaxLeakReportTokens) __builtin_trap();
        for (const auto &t : r.tokens) {
            if (t.token.empty() || t.token.size() > keyauth::kMaxReportedTokenBytes) __builtin_trap();
            if (t.url.size() > keyauth::kMaxReportedUrlBytes || t.type.size() > keyauth::kMaxReportedNameBytes ||
                t.source.size() > keyauth::kMaxReportedNameBytes) {
                __builtin_trap();
            }
        }
        return;
    }
    if (!r.tokens.empty() || !fixed_sentence(r.error)) __builtin_trap();
}

void check_key_list(std::string_view in) {
    std::vector<keyauth::GithubPublicKey> keys;
    std::string error;
    const bool ok = keyauth::parse_github_keys(in, keys, error);
    if (ok == keys.empty()) __builtin_trap();
    for (const auto &k : keys) {
        if (k.key_identifier.empty() || k.key_identifier.size() > keyauth::kMaxGithubKeyIdentifierBytes ||
            k.key_pem.size() > keyauth::kMaxPublicKeyPemBytes) {
            __builtin_trap();
        }
    }
}

void check_signatures(std::string_view in) {
    static const auto key = keyauth::EcdsaP256PublicKey::from_pem(kPublicKeyPem);
    if (key == nullptr) __builtin_trap();
    // the input as the signed body: only the very message verifies
    if (key->verify(kSignature, in) != (in == kMessage)) __builtin_trap();
    // the input as the header's text, and as the signature's DER bytes
    (void)key->verify(in, kMessage);
    if (in.size() <= keyauth::kMaxSignatureBase64Bytes / 4 * 3) {
        (void)key->verify(keyauth::etcd::base64_encode(in), kMessage);
    }
    // the input as the public key (the function that decodes it each time)
    (void)keyauth::ecdsa_p256_sha256_verify(in, kSignature, kMessage);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const std::string_view in(reinterpret_cast<const char *>(data), size);
    check_report(in);
    check_key_list(in);
    check_signatures(in);
    return 0;
}
