// The events no write raises, noticed by the webhook sender as it looks
// over the store (DESIGN, *Events and webhooks*): quota.threshold, when a
// subject (an account, or a key with its own quota) has used 80 % and then
// 100 % of its quota in the current period, and key.expiring, 7 days and 1
// day before a live key's expiresAt. Each is emitted once: its mark (the
// subject, the period or expiry, the threshold) is written in the same
// write as the event (Store::emit_event_once), so a pass run again, by this
// sender after a restart or by another after a takeover, emits nothing new.
//
// A pass reads every account and its keys, a page at a time, and each
// quota's use (quota_usage.h: the ledger on one host, the fleet's sum in
// etcd), so it runs only when an endpoint wants one of these types, once a
// minute: a crossing is told within one usage collection plus that minute.
#pragma once

#include <cstdint>

#include "quota_usage.h"
#include "store.h"

namespace keyauth {

struct WatchPass {
    size_t accounts = 0, keys = 0, emitted = 0;
};

// One pass at now_ms, for the types that `thresholds` and `expiring` say an
// endpoint wants. usage may be null (no quota use to read: no thresholds).
WatchPass watch_pass(Store &store, QuotaUsageSource *usage, int64_t now_ms, bool thresholds, bool expiring);

// The marks (exposed for tests): "quota/<subject id>/<period tag>/<80|100>",
// "expiring/<key id>/<expires ms>/<7d|1d>".
std::string quota_mark(const std::string &subject, uint8_t period, int64_t now_ms, int threshold);
std::string expiring_mark(const std::string &key, int64_t expires_ms, const char *ahead);

}  // namespace keyauth
