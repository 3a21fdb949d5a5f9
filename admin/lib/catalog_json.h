// The plan catalog as JSON for operators: the import file format
// (lmdb_schema/plans.json) and the listing of keyauthctl. Prices stay exact:
// priceInr is an integer or a decimal string with at most 2 decimals, never a
// binary floating-point number.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "records.h"

namespace keyauth {

// {"plans":[{"id","name","priceInr","features","popular","sortOrder",
//            "entitlements"?}, ...]}; entitlements (issue 28) is
// {"rateLimitPerMinute"?, "maxKeys"?, "quota"?: {"units","period"}|null}.
// Throws StoreError(kInvalid) naming the field ("plans[2].priceInr"); the
// catalog rules themselves are checked by validate_catalog.
std::vector<PlanRecord> parse_catalog(std::string_view text);

// The import file's fields plus "entitlements" (what the plan states; {}
// if nothing). Never what GET /api/plans answers: that is SPEC's fields
// only, rendered at the edge (src/core/catalog.cc).
nlohmann::json plan_to_json(const PlanRecord &plan);

// One retirement of an import, "OLD=NEW" (keyauthctl plans import --retire,
// PUT /v1/admin/plans?retire=): the accounts of plan OLD, which the new
// catalog drops, move to its plan NEW. Into `retire` (the store's
// PlanRetirements); false with what is wrong in `error`, which never
// repeats the text (a secret pasted by mistake stays out of messages).
bool add_retirement(std::string_view text, std::map<std::string, std::string> &retire, std::string &error);
nlohmann::json entitlements_to_json(const PlanRecord &plan);

}  // namespace keyauth
