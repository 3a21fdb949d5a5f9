#include "webhook_url.h"

namespace keyauth {
namespace {

// One part of the parsed URL; false when the URL has none.
bool url_part(CURLU *u, CURLUPart part, std::string &out) {
    char *text = nullptr;
    if (curl_url_get(u, part, &text, 0) != CURLUE_OK) return false;
    out = text != nullptr ? text : "";
    curl_free(text);
    return true;
}

bool has_part(CURLU *u, CURLUPart part) {
    std::string ignored;
    return url_part(u, part, ignored);
}

bool starts_with_https(std::string_view url) {
    constexpr std::string_view kHttps = "https://";
    if (url.size() < kHttps.size()) return false;
    for (size_t i = 0; i < kHttps.size(); ++i) {
        char c = url[i];
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (c != kHttps[i]) return false;
    }
    return true;
}

CurlUrl fail(std::string &error, std::string message) {
    error = std::move(message);
    return nullptr;
}

}  // namespace

CurlUrl parse_webhook_url(std::string_view url, std::string &error) {
    error.clear();
    if (url.empty()) return fail(error, "url is empty");
    if (url.size() > kMaxWebhookUrlBytes) {
        return fail(error, "url is longer than " + std::to_string(kMaxWebhookUrlBytes) + " bytes");
    }
    for (char c : url) {
        if (c <= ' ' || c > '~') {
            return fail(error, "url must be printable ASCII without spaces (percent-encode the rest)");
        }
    }
    if (url.find('#') != std::string_view::npos) return fail(error, "url must not have a fragment ('#')");

    if (starts_with_https(url) && url.size() == 8) return fail(error, "url has no host");

    CurlUrl parsed(curl_url());
    if (!parsed) return fail(error, "url could not be parsed: out of memory");
    const std::string text(url);
    CURLUcode rc = curl_url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0);
    if (rc != CURLUE_OK) {
        return fail(error, std::string("url is not a valid absolute URL: ") + curl_url_strerror(rc));
    }
    std::string scheme;
    if (!url_part(parsed.get(), CURLUPART_SCHEME, scheme) || scheme != "https") {
        if (scheme == "http") {
            return fail(error, "url must use https:// (http:// is refused: the signed events would travel in clear)");
        }
        return fail(error, "url must use https://");
    }
    // libcurl forgives "https:/host" and "https:///host"; the text must say
    // "https://" and then the host itself.
    if (!starts_with_https(url) || url[8] == '/') return fail(error, "url has no host");
    std::string host;
    if (!url_part(parsed.get(), CURLUPART_HOST, host) || host.empty()) return fail(error, "url has no host");
    if (has_part(parsed.get(), CURLUPART_USER) || has_part(parsed.get(), CURLUPART_PASSWORD) ||
        has_part(parsed.get(), CURLUPART_OPTIONS)) {
        return fail(error, "url must not contain a user name or password");
    }
    if (has_part(parsed.get(), CURLUPART_ZONEID)) return fail(error, "url must not name an IPv6 zone");
    std::string port;
    if (url_part(parsed.get(), CURLUPART_PORT, port) && port == "0") {
        return fail(error, "url's port must be from 1 to 65535");
    }
    if (has_part(parsed.get(), CURLUPART_FRAGMENT)) return fail(error, "url must not have a fragment ('#')");
    return parsed;
}

bool validate_webhook_url(std::string_view url, std::string &error) {
    return parse_webhook_url(url, error) != nullptr;
}

}  // namespace keyauth
