#include "leak_outcome.h"

#include "leak_report.h"

namespace keyauth {

const char *leak_token_type(LeakedSecret kind) {
    switch (kind) {
        case LeakedSecret::kKey: return "keyauth_api_key";
        case LeakedSecret::kAdminToken: return "keyauth_admin_token";
        case LeakedSecret::kConsoleToken: return "keyauth_console_token";
        case LeakedSecret::kNone: break;
    }
    return "";
}

ReportedSecret report_secret(Store &store, std::string_view secret, std::string_view reported_type,
                             LeakAction action, const LeakReportOrigin &origin, const Actor &actor) {
    ReportedSecret out;
    out.outcome = store.report_leak(secret, action, origin, actor);
    out.token_hash = token_sha256_hex(secret);
    out.token_type = reported_type.empty() ? leak_token_type(out.outcome.kind) : std::string(reported_type);
    return out;
}

nlohmann::json reported_secret_json(const ReportedSecret &r) {
    using nlohmann::json;
    const LeakOutcome &o = r.outcome;
    return {{"tokenHash", r.token_hash},
            {"tokenType", r.ours() ? json(r.token_type) : json(nullptr)},
            {"label", r.ours() ? "true_positive" : "false_positive"},
            {"revoked", o.revoked},
            {"changed", o.recorded},
            {"keyId", o.kind == LeakedSecret::kKey ? json(id_to_string(kKeyIdPrefix, o.target)) : json(nullptr)},
            {"accountId", r.ours() && !is_none(o.account) ? json(id_to_string(kAccountIdPrefix, o.account))
                                                          : json(nullptr)}};
}

}  // namespace keyauth
