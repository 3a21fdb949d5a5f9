#include "webhook_records.h"

#include <algorithm>
#include <cstring>

#include "json_record.h"
#include "keyauth_schema.h"
#include "rfc3339.h"

namespace keyauth {
namespace {

using nlohmann::json;

constexpr uint16_t kRecordV1 = 1;
constexpr size_t kMaxJson = 64 * 1024;  // an event's data is ids and changed fields

std::string encode(const json &body) { return encode_json_record(kRecordV1, body); }

std::optional<json> decode(std::string_view value) { return decode_json_record(kRecordV1, value, kMaxJson); }

Id id_at(std::string_view key, size_t at) {
    Id id{};
    std::memcpy(id.data(), key.data() + at, KA_ID_LEN);
    return id;
}

json optional_ms(const std::optional<int64_t> &ms) { return ms ? json(format_time(*ms)) : json(nullptr); }

std::optional<int64_t> optional_ms_from(const json &body, const char *name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) return std::nullopt;
    return it->get<int64_t>();
}

// The record's "account" (absent: none); false if it is no account id.
bool account_from(const json &body, std::optional<Id> &out) {
    auto it = body.find("account");
    if (it == body.end()) return true;
    Id acc{};
    if (!parse_id(kAccountIdPrefix, it->get<std::string>(), acc)) return false;
    out = acc;
    return true;
}

}  // namespace

bool Webhook::wants(std::string_view type, const std::optional<Id> &event_account) const {
    if (disabled_ms) return false;
    if (account && (!event_account || *event_account != *account)) return false;
    return std::find(events.begin(), events.end(), type) != events.end();
}

std::string encode_webhook(const Webhook &w) {
    json body = {{"url", w.url}, {"events", w.events}, {"createdAt", w.created_ms}};
    if (w.account) body["account"] = id_to_string(kAccountIdPrefix, *w.account);
    if (w.disabled_ms) body["disabledAt"] = *w.disabled_ms;
    return encode(body);
}

std::optional<Webhook> decode_webhook(std::string_view key, std::string_view value) {
    if (key.size() != KA_ID_LEN) return std::nullopt;
    auto body = decode(value);
    if (!body) return std::nullopt;
    Webhook w;
    w.id = id_at(key, 0);
    try {
        w.url = body->at("url").get<std::string>();
        w.events = body->at("events").get<std::vector<std::string>>();
        w.created_ms = body->at("createdAt").get<int64_t>();
        if (!account_from(*body, w.account)) return std::nullopt;
        w.disabled_ms = optional_ms_from(*body, "disabledAt");
    } catch (const json::exception &) {
        return std::nullopt;
    }
    return w;
}

json webhook_to_json(const Webhook &w) {
    return {{"id", id_to_string(kWebhookIdPrefix, w.id)},
            {"url", w.url},
            {"events", w.events},
            {"accountId", w.account ? json(id_to_string(kAccountIdPrefix, *w.account)) : json(nullptr)},
            {"status", w.disabled_ms ? "disabled" : "active"},
            {"createdAt", format_time(w.created_ms)},
            {"disabledAt", optional_ms(w.disabled_ms)}};
}

std::string OutboxEvent::body() const {
    json b = {{"type", type}, {"timestamp", format_time(at_ms)}, {"data", data}};
    return b.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string encode_outbox_event(const OutboxEvent &e) {
    json body = {{"type", e.type}, {"at", e.at_ms}, {"data", e.data}};
    if (e.account) body["account"] = id_to_string(kAccountIdPrefix, *e.account);
    return encode(body);
}

std::optional<OutboxEvent> decode_outbox_event(std::string_view key, std::string_view value) {
    if (key.size() != KA_ID_LEN) return std::nullopt;
    auto body = decode(value);
    if (!body) return std::nullopt;
    OutboxEvent e;
    e.id = id_at(key, 0);
    try {
        e.type = body->at("type").get<std::string>();
        e.at_ms = body->at("at").get<int64_t>();
        e.data = body->at("data");
        if (!account_from(*body, e.account)) return std::nullopt;
    } catch (const json::exception &) {
        return std::nullopt;
    }
    return e;
}

const char *delivery_status_name(DeliveryStatus s) noexcept {
    switch (s) {
        case DeliveryStatus::kPending: return "pending";
        case DeliveryStatus::kDelivered: return "delivered";
        case DeliveryStatus::kDead: return "dead";
    }
    return "pending";
}

std::optional<DeliveryStatus> delivery_status_named(std::string_view name) noexcept {
    for (DeliveryStatus s : {DeliveryStatus::kPending, DeliveryStatus::kDelivered, DeliveryStatus::kDead}) {
        if (name == delivery_status_name(s)) return s;
    }
    return std::nullopt;
}

std::string delivery_key(const Id &webhook, const Id &event) {
    std::string k(reinterpret_cast<const char *>(webhook.data()), webhook.size());
    k.append(reinterpret_cast<const char *>(event.data()), event.size());
    return k;
}

std::string encode_delivery(const Delivery &d) {
    json body = {{"type", d.type},       {"body", d.body},           {"status", delivery_status_name(d.status)},
                 {"attempts", d.attempts}, {"createdAt", d.created_ms}, {"nextAt", d.next_ms},
                 {"lastStatus", d.last_status}, {"lastError", d.last_error}};
    if (d.last_attempt_ms) body["lastAttemptAt"] = *d.last_attempt_ms;
    if (d.finished_ms) body["finishedAt"] = *d.finished_ms;
    return encode(body);
}

std::optional<Delivery> decode_delivery(std::string_view key, std::string_view value) {
    if (key.size() != 2 * KA_ID_LEN) return std::nullopt;
    auto body = decode(value);
    if (!body) return std::nullopt;
    Delivery d;
    d.webhook = id_at(key, 0);
    d.event = id_at(key, KA_ID_LEN);
    try {
        d.type = body->at("type").get<std::string>();
        d.body = body->at("body").get<std::string>();
        auto status = delivery_status_named(body->at("status").get<std::string>());
        if (!status) return std::nullopt;
        d.status = *status;
        d.attempts = body->at("attempts").get<int>();
        d.created_ms = body->at("createdAt").get<int64_t>();
        d.next_ms = body->at("nextAt").get<int64_t>();
        d.last_status = body->at("lastStatus").get<long>();
        d.last_error = body->at("lastError").get<std::string>();
        d.last_attempt_ms = optional_ms_from(*body, "lastAttemptAt");
        d.finished_ms = optional_ms_from(*body, "finishedAt");
    } catch (const json::exception &) {
        return std::nullopt;
    }
    return d;
}

json delivery_to_json(const Delivery &d) {
    return {{"webhookId", id_to_string(kWebhookIdPrefix, d.webhook)},
            {"eventId", id_to_string(kEventIdPrefix, d.event)},
            {"type", d.type},
            {"status", delivery_status_name(d.status)},
            {"attempts", d.attempts},
            {"createdAt", format_time(d.created_ms)},
            {"nextAttemptAt", d.status == DeliveryStatus::kPending ? json(format_time(d.next_ms)) : json(nullptr)},
            {"lastAttemptAt", optional_ms(d.last_attempt_ms)},
            {"lastStatus", d.last_status ? json(d.last_status) : json(nullptr)},
            {"lastError", d.last_error.empty() ? json(nullptr) : json(d.last_error)},
            {"finishedAt", optional_ms(d.finished_ms)}};
}

std::string due_key(int64_t at_ms, const Id &webhook, const Id &event) {
    std::string k(8, '\0');
    const uint64_t v = static_cast<uint64_t>(std::max<int64_t>(at_ms, 0));
    for (int i = 0; i < 8; i++) k[i] = static_cast<char>(v >> (56 - 8 * i));
    return k + delivery_key(webhook, event);
}

bool parse_due_key(std::string_view key, int64_t &at_ms, Id &webhook, Id &event) {
    if (key.size() != 8 + 2 * KA_ID_LEN) return false;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | static_cast<unsigned char>(key[i]);
    at_ms = static_cast<int64_t>(v);
    webhook = id_at(key, 8);
    event = id_at(key, 8 + KA_ID_LEN);
    return true;
}

}  // namespace keyauth
