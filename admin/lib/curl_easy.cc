#include "curl_easy.h"

#include <algorithm>

namespace keyauth {

void curl_guard_transfer(CURL *e, char *error_buffer, std::chrono::milliseconds timeout) {
    const long timeout_ms = std::max<long>(1, static_cast<long>(timeout.count()));
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    // "" and "*": neither the environment's proxies nor any other
    curl_easy_setopt(e, CURLOPT_PROXY, "");
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
}

}  // namespace keyauth
