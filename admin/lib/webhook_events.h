// The events webhooks carry (DESIGN, *Events and webhooks*): their types,
// which audit actions raise which, and the event a change writes into the
// outbox in the same transaction as its audit record (store_audit.cc), so
// that an acknowledged change always has its event, and a refused one none.
// An event's data holds ids and changed fields as the audit trail records
// them: never a secret, a token or a hash of either.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit.h"
#include "webhook_records.h"

namespace keyauth {

inline constexpr const char *kKeyExpiring = "key.expiring";
inline constexpr const char *kKeyLeaked = "key.leaked";
inline constexpr const char *kQuotaThreshold = "quota.threshold";

// Every type an endpoint may subscribe to, in DESIGN's order.
const std::vector<std::string> &webhook_event_types();
bool is_webhook_event_type(std::string_view type);

// The type an audit action raises ("key.create" -> "key.created"), or none
// (console sessions, tokens, plans, fx and webhooks raise none).
std::optional<std::string> webhook_event_type_for(std::string_view audit_action);

// The outbox event of an audited change, or none; its id is the audit
// event's, so a receiver can find it in the audit trail.
std::optional<OutboxEvent> outbox_event_from(const AuditEvent &e);

}  // namespace keyauth
