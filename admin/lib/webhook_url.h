// A webhook endpoint's URL (issue #46): what `webhook create` accepts, and
// the parsed form the sender hands to libcurl. Both go through libcurl's
// own URL parser (the CURLU API), so what is accepted at create time is
// exactly what is dialled later: no second parser to disagree with it.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>
#include <string_view>

namespace keyauth {

inline constexpr size_t kMaxWebhookUrlBytes = 2048;

struct CurlUrlFree {
    void operator()(CURLU *u) const { curl_url_cleanup(u); }
};
using CurlUrl = std::unique_ptr<CURLU, CurlUrlFree>;

// The rules: 1 to 2048 bytes of printable ASCII (no space or control
// character: percent-encode them); an absolute URL whose scheme is https
// (http is refused: the signed body would travel in clear); "https://"
// followed by a host (libcurl would read "https:///x" as host "x", so the
// text itself must carry the host); no user name or password; no IPv6 zone
// id; a port, if any, from 1 to 65535; no fragment ('#' anywhere). Whether
// the host's addresses may be dialled is decided at each connect
// (webhook_address.h), not here: a name resolves differently over time.
//
// On failure the result is null and `error` is one sentence that starts
// with the field's name, "url ...", and never repeats the URL (its path or
// query may hold a receiver's token).
CurlUrl parse_webhook_url(std::string_view url, std::string &error);

// parse_webhook_url for create time: true if it is accepted.
bool validate_webhook_url(std::string_view url, std::string &error);

}  // namespace keyauth
