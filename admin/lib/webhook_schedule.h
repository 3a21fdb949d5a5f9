// When a webhook delivery is tried again, and what an attempt's answer
// makes of it (DESIGN, *Events and webhooks*): a 2xx delivers; 410 Gone
// ends the delivery and disables the endpoint; anything else (another
// status, no answer in 10 s, a refused address) is tried again about 5 s,
// 5 min, 30 min, 2 h, 5 h, 10 h and 10 h later, each ±10 % at random so
// that endpoints that failed together are not tried again together; after
// the eighth attempt the delivery is dead and stays listed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "store.h"

namespace keyauth {

inline constexpr int kWebhookAttempts = 8;

// The wait after attempt number `attempts_made` (1 = the first) failed, or
// none when that was the last. `random` picks the jitter.
std::optional<int64_t> webhook_retry_delay_ms(int attempts_made, uint32_t random);

// The delivery after one attempt at now_ms that got HTTP `status` (0: none,
// with `error` saying why).
DeliveryUpdate settle_webhook_attempt(const Delivery &d, long status, const std::string &error, int64_t now_ms,
                                      uint32_t random);

}  // namespace keyauth
