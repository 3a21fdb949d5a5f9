// One reported secret, as every way of reporting one answers it (GitHub's
// secret scanning endpoint, the admin API's report-leak route, keyauthctl
// key report-leak): the store's outcome with the secret's hash and type,
// and the answer's JSON. Never any part of the secret itself.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "store.h"

namespace keyauth {

// The type each secret of a deployment is registered under with a scanner
// (docs/secret-scanning.md): keyauth_api_key, keyauth_admin_token,
// keyauth_console_token; "" for a secret that is none of them.
const char *leak_token_type(LeakedSecret kind);

struct ReportedSecret {
    LeakOutcome outcome;
    std::string token_hash;  // hex SHA-256 of the secret, as a scanner computes it
    std::string token_type;  // the scanner's type when it gave one, else ours
    bool ours() const { return outcome.kind != LeakedSecret::kNone; }
};

ReportedSecret report_secret(Store &store, std::string_view secret, std::string_view reported_type,
                             LeakAction action, const LeakReportOrigin &origin, const Actor &actor);

// {tokenHash, tokenType (null: not ours), label (true_positive: a secret
// this deployment issued; false_positive), revoked (by this report),
// changed (this report wrote anything), keyId, accountId}.
nlohmann::json reported_secret_json(const ReportedSecret &r);

}  // namespace keyauth
