#include "curl_global.h"

#include <curl/curl.h>

#include <mutex>

namespace keyauth {

bool curl_global_ready() {
    static std::once_flag once;
    static CURLcode rc = CURLE_OK;
    std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
    return rc == CURLE_OK;
}

}  // namespace keyauth
