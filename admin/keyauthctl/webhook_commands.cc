// keyauthctl webhook create|list|delete|deliveries: the endpoints events
// are sent to (DESIGN, *Events and webhooks*). keyauthd sends; keyauthctl
// only writes the store, and derives a new endpoint's signing secret from
// the deployment's webhook key file to print it once.
#include "command_support.h"
#include "commands.h"
#include "terminal_text.h"
#include "webhook_events.h"
#include "webhook_signing.h"

namespace keyauthctl {

using nlohmann::json;

namespace {

std::string webhook_key_file;
bool webhook_key_made_here = false;

std::string webhook_line(const json &w) {
    std::string events;
    for (const auto &e : w["events"]) events += (events.empty() ? "" : ",") + e.get<std::string>();
    return terminal_safe(w["id"].get<std::string>() + "  " + w["status"].get<std::string>() + "  " +
                         w["url"].get<std::string>() + "  " + events +
                         (w["accountId"].is_null() ? "" : "  " + w["accountId"].get<std::string>())) +
           "\n";
}

std::string delivery_line(const json &d) {
    std::string line = d["eventId"].get<std::string>() + "  " + d["status"].get<std::string>() + "  " +
                       d["type"].get<std::string>() + "  attempts " + std::to_string(d["attempts"].get<int>());
    if (!d["lastStatus"].is_null()) line += "  last HTTP " + std::to_string(d["lastStatus"].get<long>());
    if (!d["lastError"].is_null()) line += "  last error: " + d["lastError"].get<std::string>();
    if (!d["nextAttemptAt"].is_null()) line += "  next " + d["nextAttemptAt"].get<std::string>();
    return terminal_safe(line) + "\n";
}

// Every --event named, each a known type (exit 2 otherwise).
std::vector<std::string> events_arg(const Args &a) {
    std::vector<std::string> out;
    for (const std::string &e : a.all("event")) {
        if (!keyauth::is_webhook_event_type(e)) {
            std::string known;
            for (const std::string &t : keyauth::webhook_event_types()) known += (known.empty() ? "" : ", ") + t;
            throw UsageError("--event \"" + shown(e) + "\" is not an event type (" + known + ")");
        }
        out.push_back(e);
    }
    return out;
}

}  // namespace

void set_webhook_key_file(const std::string &path, bool make_if_missing) {
    webhook_key_file = path;
    webhook_key_made_here = make_if_missing;
}

int run_webhook(keyauth::Store &store, const Args &a) {
    const bool as_json = a.as_json;
    const std::string verb = a.words.at(1);
    if (verb == "create") {
        keyauth::WebhookSpec spec;
        spec.url = a.need("url");
        spec.events = events_arg(a);
        if (auto acc = a.opt("account")) spec.account = parse_id_arg(keyauth::kAccountIdPrefix, *acc, "--account");
        if (webhook_key_file.empty())
            throw UsageError("webhook create with --etcd needs --webhook-key-file: the key file every keyauthd "
                             "sends with (keyauthd --webhook-key-file)");
        std::string error;
        auto key = webhook_key_made_here ? keyauth::load_or_make_webhook_key(webhook_key_file, error)
                                         : keyauth::load_webhook_key(webhook_key_file, error);
        if (!key) throw std::runtime_error("webhook key: " + error);
        keyauth::Webhook w;
        try {
            w = store.create_webhook(spec, operator_actor());
        } catch (const keyauth::StoreError &e) {
            if (e.kind() != keyauth::StoreError::Kind::kInvalid) throw;
            throw InputError(std::string(e.what()) + " (nothing was written)");
        }
        const std::string secret = keyauth::webhook_secret_text(keyauth::webhook_secret(*key, w.id));
        json j = keyauth::webhook_to_json(w);
        j["secret"] = secret;
        print(as_json, j,
              webhook_line(j) + "signing secret (shown once; the receiver verifies with it): " + secret + "\n");
        return 0;
    }
    if (verb == "list") {
        json arr = json::array();
        std::string text;
        for (const keyauth::Webhook &w : store.list_webhooks()) {
            arr.push_back(keyauth::webhook_to_json(w));
            text += webhook_line(arr.back());
        }
        print(as_json, json{{"webhooks", arr}}, text.empty() ? "no webhooks\n" : text);
        return 0;
    }
    const keyauth::Id id = parse_id_arg(keyauth::kWebhookIdPrefix, a.words.at(2), "WEBHOOK_ID");
    if (verb == "delete") {
        json j = keyauth::webhook_to_json(store.delete_webhook(id, operator_actor()));
        print(as_json, j, "deleted " + webhook_line(j));
        return 0;
    }
    std::optional<keyauth::DeliveryStatus> status;
    if (auto s = a.opt("status")) {
        status = keyauth::delivery_status_named(*s);
        if (!status) throw UsageError("--status is pending, delivered or dead");
    }
    uint32_t limit = 100;
    if (auto l = a.opt("limit")) limit = parse_u32(*l, "--limit");
    if (limit < 1 || limit > keyauth::Store::kMaxPageSize)
        throw UsageError("--limit must be from 1 to " + std::to_string(keyauth::Store::kMaxPageSize));
    std::optional<keyauth::Id> after;
    if (auto c = a.opt("cursor")) after = parse_id_arg(keyauth::kEventIdPrefix, *c, "--cursor");
    keyauth::DeliveryPage page = store.list_deliveries(id, status, limit, after);
    json arr = json::array();
    std::string text;
    for (const keyauth::Delivery &d : page.deliveries) {
        arr.push_back(keyauth::delivery_to_json(d));
        text += delivery_line(arr.back());
    }
    json next = page.next ? json(keyauth::id_to_string(keyauth::kEventIdPrefix, *page.next)) : json(nullptr);
    if (page.next) text += "more: --cursor " + next.get<std::string>() + "\n";
    print(as_json, json{{"deliveries", arr}, {"next", next}}, text.empty() ? "no deliveries\n" : text);
    return 0;
}

}  // namespace keyauthctl
