// What /metrics shows of keyauthd's webhook sender: attempts by outcome,
// whether this keyauthd is the sender, and, on the sender, the queue: pending
// deliveries, events not yet fanned out, and the age of the oldest of them.
#pragma once

#include <string>

#include "store.h"
#include "webhook_sender.h"

namespace keyauth {

// `counts` is null when this keyauthd sends nothing (no webhook key).
std::string render_webhook_metrics(const WebhookSenderCounts *counts, bool sending, Store &store);

}  // namespace keyauth
