// Quotas as the API, the catalog file and keyauthctl speak of them
// (issue 28): {"units": N, "period": "day"|"month"|"total"} or null, and
// "UNITS/PERIOD" or "none" on a command line. Every reader refuses what a
// record may not hold (units 0, negative, above KA_QUOTA_UNITS_MAX, an
// unknown period, "total" where only day and month are taken) with
// StoreError kInvalid naming the field, before anything is written.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "quota_usage.h"
#include "records.h"

namespace keyauth {

// Where a quota is given: a key takes total credits, a plan or an account
// only calendar periods.
enum class QuotaOwner { kKey, kAccountOrPlan };

// {"units","period"} or null (no quota). `field` names the member in errors.
Quota quota_from_json(const nlohmann::json &v, QuotaOwner owner, const std::string &field);

// "1000/month", "1/total" or "none"; nullopt if the text is not one of
// these forms or the quota is not allowed for `owner` (why: `why`).
std::optional<Quota> quota_from_text(const std::string &text, QuotaOwner owner, std::string &why);

// The quota's object as keys and accounts show it: null, or
// {"units","period","used","remaining","resetsAt"} with remaining =
// units - used (below zero after a metered call overshot) and resetsAt the
// end of the period holding now_ms (null for total). used unknown: used
// and remaining null.
nlohmann::json quota_to_json(const Quota &q, std::optional<uint64_t> used, int64_t now_ms);

// What `id` used of quota `q` this period: 0 without a quota or a source,
// nullopt when the source cannot be read now. Never throws: an answer that
// carries a new secret or token must not fail after its commit.
std::optional<uint64_t> quota_used_of(QuotaUsageSource *source, QuotaSubject subject, const Id &id,
                                      const Quota &q, int64_t now_ms) noexcept;

// {"units","period"} or null: a plan's stated quota, without use.
nlohmann::json quota_terms_json(const Quota &q);

}  // namespace keyauth
