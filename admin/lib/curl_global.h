// libcurl's process-wide initialisation, done once whoever asks first (the
// etcd client, the webhook sender). curl_global_init is not safe to race
// with itself on every libcurl build, so every caller goes through here.
#pragma once

namespace keyauth {

// True once curl_global_init(CURL_GLOBAL_DEFAULT) has succeeded; the first
// call does it, later calls return its result.
bool curl_global_ready();

}  // namespace keyauth
