// Secrets reported as leaked, over HTTP (DESIGN, *Leaked keys revoke
// themselves*): GitHub's secret scanning partner endpoint, POST
// /v1/secret-scanning/github on the console listener (public: the scanner
// reaches it through nginx). Each token goes through report_secret
// (leak_outcome.h), as the admin API's and keyauthctl's reports do;
// nothing here logs or answers any part of a secret.
#pragma once

#include <string>
#include <string_view>

#include "github_keys.h"
#include "http_exchange.h"
#include "leak_outcome.h"
#include "store.h"

namespace keyauth {

class SecretScanningApi {
public:
    static constexpr const char *kGithubPath = "/v1/secret-scanning/github";

    SecretScanningApi(Store &store, GithubKeys &keys, LeakAction action)
        : store_(store), keys_(keys), action_(action) {}

    // A signed report: 200 with the feedback array (one entry a token);
    // 401 for a signature missing, bad or by a key GitHub does not list;
    // 503 while GitHub's key list cannot be had (the scanner retries);
    // 400 for a body that is not a report, 413 past 1,000 tokens (1 MiB is
    // the server's: http_server.h large_body). Never throws.
    HttpResponse handle(const HttpRequest &req) noexcept;

private:
    HttpResponse report(const HttpRequest &req);

    Store &store_;
    GithubKeys &keys_;
    LeakAction action_;
};

}  // namespace keyauth
