// The webhook tables' records (DESIGN, *Events and webhooks*): an endpoint,
// an event waiting in the outbox, and one event's delivery to one endpoint.
// They live in keyauthd's store alone (LMDB on one host, etcd on many; never
// mirrored to an edge) as a u16 version, a u16 reserved and a JSON object,
// like the audit trail. No record holds a signing secret: an endpoint's is
// derived from the deployment's webhook key file (webhook_signing.h).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ids.h"

namespace keyauth {

inline constexpr std::string_view kWebhookIdPrefix = "wh_";

struct Webhook {
    Id id{};
    std::string url;
    std::vector<std::string> events;  // event types (webhook_events.h)
    std::optional<Id> account;        // only this account's events; none: every account's
    int64_t created_ms = 0;
    std::optional<int64_t> disabled_ms;  // the receiver answered 410 Gone
    bool wants(std::string_view type, const std::optional<Id> &event_account) const;
};

std::string encode_webhook(const Webhook &w);
std::optional<Webhook> decode_webhook(std::string_view key, std::string_view value);
nlohmann::json webhook_to_json(const Webhook &w);

// An event written with the change it reports (or, for thresholds and
// expiry, when first noticed), waiting to be fanned out to the endpoints.
struct OutboxEvent {
    Id id{};                    // also the message id every endpoint gets
    std::string type;
    int64_t at_ms = 0;
    std::optional<Id> account;  // whose event it is (none: the operator's)
    nlohmann::json data = nlohmann::json::object();
    // The body sent, fixed once: every retry signs the same bytes.
    std::string body() const;
};

std::string encode_outbox_event(const OutboxEvent &e);
std::optional<OutboxEvent> decode_outbox_event(std::string_view key, std::string_view value);

enum class DeliveryStatus { kPending, kDelivered, kDead };
const char *delivery_status_name(DeliveryStatus s) noexcept;
std::optional<DeliveryStatus> delivery_status_named(std::string_view name) noexcept;

struct Delivery {
    Id webhook{};
    Id event{};
    std::string type;
    std::string body;  // exactly as signed and sent
    DeliveryStatus status = DeliveryStatus::kPending;
    int attempts = 0;
    int64_t created_ms = 0;
    int64_t next_ms = 0;  // pending: when the next attempt is due
    std::optional<int64_t> last_attempt_ms;
    long last_status = 0;    // the receiver's HTTP status; 0: none
    std::string last_error;  // why there was none ("timeout", "refused: ...")
    std::optional<int64_t> finished_ms;  // delivered or dead
};

// webhook id ++ event id
std::string delivery_key(const Id &webhook, const Id &event);
std::string encode_delivery(const Delivery &d);
std::optional<Delivery> decode_delivery(std::string_view key, std::string_view value);
// The delivery as `webhook deliveries` and the admin API list it (no body).
nlohmann::json delivery_to_json(const Delivery &d);

// The due index: u64 BE ms ++ webhook id ++ event id, one per pending
// delivery, so the sender reads what is due in time order.
std::string due_key(int64_t at_ms, const Id &webhook, const Id &event);
bool parse_due_key(std::string_view key, int64_t &at_ms, Id &webhook, Id &event);

}  // namespace keyauth
