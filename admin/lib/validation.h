// The input rules every writer shares (names, scopes, rates, the plan
// catalog), apart from where records are stored. Each throws
// StoreError(kInvalid, field, message) naming the offending input field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "records.h"

namespace keyauth {

inline constexpr uint32_t kMaxRatePerMinute = 10'000'000;

void validate_name(std::string_view name);
// A label a person or another system chose (a name, an externalId): 1 to
// max_len bytes of UTF-8, no control or bidi control characters.
void validate_label(std::string_view text, const char *field, size_t max_len);
void validate_scopes(const std::vector<std::string> &scopes);
void validate_rate(uint32_t rpm, const char *field);
// The whole catalog: ids, names, prices, features, one popular plan, distinct
// sortOrder values. Fields are named "plans[3].priceInr" style.
void validate_catalog(const std::vector<PlanRecord> &plans);

}  // namespace keyauth
