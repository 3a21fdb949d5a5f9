#include "leak_api.h"

#include "api_support.h"
#include "leak_report.h"

namespace keyauth {

HttpResponse SecretScanningApi::handle(const HttpRequest &req) noexcept {
    return answer_or_error([&] { return report(req); }, "NOT_FOUND");
}

HttpResponse SecretScanningApi::report(const HttpRequest &req) {
    if (req.method != "POST") return method_not_allowed("POST");
    // The signature first: an unsigned body is not even parsed.
    switch (keys_.verify(req.github_key_identifier, req.github_key_signature, req.body)) {
        case SignatureVerdict::kValid: break;
        case SignatureVerdict::kUnavailable: {
            HttpResponse r = json_error(503, "SIGNING_KEYS_UNAVAILABLE",
                                        "GitHub's signing keys cannot be read now; retry later");
            r.headers.emplace_back("Retry-After", "60");
            r.internal_error = "github signing keys unavailable";
            return r;
        }
        case SignatureVerdict::kBadSignature:
        case SignatureVerdict::kUnknownKey:
            return json_error(401, "INVALID_SIGNATURE",
                              "Github-Public-Key-Signature does not verify with the key "
                              "Github-Public-Key-Identifier names");
    }
    LeakReport parsed = parse_leak_report(req.body);
    if (parsed.status == LeakReportStatus::kTooLarge) {
        return json_error(413, "PAYLOAD_TOO_LARGE", parsed.error);
    }
    if (parsed.status != LeakReportStatus::kOk) return json_error(400, "BAD_REQUEST", parsed.error);
    std::vector<LeakFeedback> feedback;
    feedback.reserve(parsed.tokens.size());
    const Actor actor = Actor::secret_scanning("github", req.client_address);
    for (const ReportedToken &t : parsed.tokens) {
        // a url the store would refuse (a control character) must not cost
        // the report: it is kept without them
        std::string url;
        for (unsigned char ch : t.url)
            if (ch >= 0x20 && ch != 0x7f) url.push_back(static_cast<char>(ch));
        ReportedSecret r = report_secret(store_, t.token, t.type, action_, LeakReportOrigin{"github", url}, actor);
        feedback.push_back(LeakFeedback{r.token_hash, r.token_type, r.outcome.kind != LeakedSecret::kNone});
    }
    HttpResponse out = json_response(200, leak_feedback_json(feedback));
    out.headers.emplace_back("Cache-Control", "no-store");
    return out;
}

}  // namespace keyauth
