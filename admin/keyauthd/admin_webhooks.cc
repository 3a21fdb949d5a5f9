// The admin API's webhook routes (scope webhooks:write): the endpoints the
// business's services hear from keyauth at, and what was sent to each. The
// rules are the Store's, as keyauthctl webhook calls them.
#include "admin_api.h"
#include "api_support.h"
#include "webhook_events.h"

namespace keyauth {

using nlohmann::json;

namespace {

HttpResponse webhook_not_found() { return json_error(404, "WEBHOOK_NOT_FOUND", "No such webhook"); }

}  // namespace

std::optional<Id> AdminApi::webhook_param(const Call &c, HttpResponse &missing) {
    Id id{};
    if (!parse_id(kWebhookIdPrefix, c.params.at(0), id) || !store_.find_webhook(id)) {
        missing = webhook_not_found();
        return std::nullopt;
    }
    return id;
}

HttpResponse AdminApi::create_webhook(const Call &c) {
    HttpResponse refused;
    std::optional<json> parsed = object_body(c.req, refused);
    if (!parsed) return refused;
    const json &body = *parsed;
    if (auto r = only_fields(body, {"url", "events", "accountId"}, "url")) return *r;
    WebhookSpec spec;
    if (!body.contains("url") || !body["url"].is_string()) return invalid("url", "url must be an https:// URL");
    spec.url = body["url"].get<std::string>();
    if (!body.contains("events") || !body["events"].is_array() || body["events"].empty())
        return invalid("events", "events must be a list of event types");
    for (const json &e : body["events"]) {
        if (!e.is_string() || !is_webhook_event_type(e.get<std::string>()))
            return invalid("events", "events holds an unknown event type");
        spec.events.push_back(e.get<std::string>());
    }
    if (body.contains("accountId") && !body["accountId"].is_null()) {
        Id acc{};
        if (!body["accountId"].is_string() || !parse_id(kAccountIdPrefix, body["accountId"].get<std::string>(), acc))
            return invalid("accountId", "accountId must be an account id (acc_...)");
        spec.account = acc;
    }
    if (!webhook_key_)
        return json_error(503, "WEBHOOKS_UNAVAILABLE",
                          "This keyauthd has no webhook key file (--webhook-key-file): it cannot sign");
    const Webhook w = store_.create_webhook(spec, c.actor);
    json j = webhook_to_json(w);
    j["secret"] = webhook_secret_text(webhook_secret(*webhook_key_, w.id));
    HttpResponse r = json_response(201, j);
    r.headers.emplace_back("Cache-Control", "no-store");  // the one copy of the secret
    return r;
}

HttpResponse AdminApi::list_webhooks(const Call &c) {
    std::map<std::string, std::string> q;
    if (auto r = query_args(c.req, {}, q)) return *r;
    json arr = json::array();
    for (const Webhook &w : store_.list_webhooks()) arr.push_back(webhook_to_json(w));
    return json_response(200, json{{"webhooks", arr}});
}

HttpResponse AdminApi::delete_webhook(const Call &c) {
    HttpResponse missing;
    auto id = webhook_param(c, missing);
    if (!id) return missing;
    return json_response(200, webhook_to_json(store_.delete_webhook(*id, c.actor)));
}

HttpResponse AdminApi::list_webhook_deliveries(const Call &c) {
    HttpResponse missing;
    auto id = webhook_param(c, missing);
    if (!id) return missing;
    std::map<std::string, std::string> q;
    if (auto r = query_args(c.req, {"limit", "cursor", "status"}, q)) return *r;
    std::optional<DeliveryStatus> status;
    if (auto it = q.find("status"); it != q.end()) {
        status = delivery_status_named(it->second);
        if (!status) return invalid("status", "status is pending, delivered or dead");
    }
    size_t limit;
    std::optional<Id> after;
    if (auto r = page_args(c.req, kEventIdPrefix, limit, after)) return *r;
    DeliveryPage page = store_.list_deliveries(*id, status, limit, after);
    json arr = json::array();
    for (const Delivery &d : page.deliveries) arr.push_back(delivery_to_json(d));
    json next = page.next ? json(id_to_string(kEventIdPrefix, *page.next)) : json(nullptr);
    HttpResponse r = json_response(200, json{{"deliveries", arr}, {"nextCursor", next}});
    r.headers.emplace_back("Cache-Control", "no-store");
    return r;
}

}  // namespace keyauth
