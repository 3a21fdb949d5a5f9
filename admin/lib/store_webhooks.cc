// Webhook endpoints and their deliveries: made, listed and deleted by
// operators and the admin API; fanned out, attempted and settled by the
// sender (webhook_sender.h). Every step is one guarded write, so two
// senders (an old leader that has not yet noticed it lost its lease) can
// never both settle one attempt, and a sender killed at any point finds
// the delivery still pending when it comes back.
#include <algorithm>
#include <set>

#include "keyauth_schema.h"
#include "le.h"
#include "store.h"
#include "store_internal.h"
#include "webhook_events.h"
#include "webhook_url.h"

namespace keyauth {
using namespace store_detail;
namespace {

[[noreturn]] void no_webhook(const Id &id) {
    throw StoreError(StoreError::Kind::kNotFound, "id", "no webhook " + id_to_string(kWebhookIdPrefix, id),
                     "WEBHOOK_NOT_FOUND");
}

Webhook webhook_from(std::string_view key, std::string_view v) {
    auto w = decode_webhook(key, v);
    if (!w) corrupt("a webhook record is unreadable");
    return *w;
}

std::vector<Webhook> read_webhooks(RecordReader &r) {
    std::vector<Webhook> out;
    r.scan(Table::kWebhooks, "", "", [&](std::string_view k, std::string_view v) {
        out.push_back(webhook_from(k, v));
        return true;
    });
    return out;
}

Delivery delivery_from(std::string_view key, std::string_view v) {
    auto d = decode_delivery(key, v);
    if (!d) corrupt("a webhook delivery record is unreadable");
    return *d;
}

// etcd takes at most 128 operations a txn: a fan-out batch stays under,
// and so does one event to every endpoint (a batch takes it alone).
constexpr size_t kFanOutOps = 100;
static_assert(2 + 2 * Store::kMaxWebhooks <= 120, "one event's fan-out fits an etcd txn");

}  // namespace

Webhook Store::create_webhook(const WebhookSpec &spec, const Actor &actor) {
    std::string error;
    if (!validate_webhook_url(spec.url, error)) invalid("url", error);
    if (spec.events.empty()) invalid("events", "name at least one event type");
    std::vector<std::string> events;
    for (const std::string &type : spec.events) {
        if (!is_webhook_event_type(type)) invalid("events", "\"" + type.substr(0, 64) + "\" is no event type");
        if (std::find(events.begin(), events.end(), type) == events.end()) events.push_back(type);
    }
    return write([&](RecordReader &r, Mutation &m) {
        const int64_t now = clock_();
        if (spec.account) account_for_write(r, *spec.account);
        std::vector<Webhook> all = read_webhooks(r);
        if (all.size() >= kMaxWebhooks)
            throw StoreError(StoreError::Kind::kConflict, "url",
                             "at most " + std::to_string(kMaxWebhooks) + " webhooks; delete one first",
                             "WEBHOOK_LIMIT_REACHED");
        m.expect_unchanged(Table::kWebhooks);
        Webhook w;
        w.id = generate_id(now);
        w.url = spec.url;
        w.events = events;
        w.account = spec.account;
        w.created_ms = now;
        m.expect(Table::kWebhooks, bytes(w.id), std::nullopt);
        m.put(Table::kWebhooks, bytes(w.id), encode_webhook(w));
        std::vector<AuditEvent> trail;
        AuditEvent &e = audit(trail, actor, now, Id{}, "webhook.create", "webhook", id_to_string(kWebhookIdPrefix, w.id));
        e.change("url", nullptr, w.url);
        e.change("events", nullptr, w.events);
        if (w.account) e.change("accountId", nullptr, id_to_string(kAccountIdPrefix, *w.account));
        put_audit(r, m, trail);
        return w;
    });
}

std::vector<Webhook> Store::list_webhooks() { return read_webhooks(*backend_->read()); }

std::optional<Webhook> Store::find_webhook(const Id &id) {
    auto r = backend_->read();
    auto v = r->get(Table::kWebhooks, bytes(id));
    if (!v) return std::nullopt;
    return webhook_from(bytes(id), *v);
}

Webhook Store::delete_webhook(const Id &id, const Actor &actor) {
    return write([&](RecordReader &r, Mutation &m) {
        auto v = r.get(Table::kWebhooks, bytes(id));
        if (!v) no_webhook(id);
        Webhook w = webhook_from(bytes(id), *v);
        m.expect(Table::kWebhooks, bytes(id), *v);
        m.erase(Table::kWebhooks, bytes(id));
        std::vector<AuditEvent> trail;
        AuditEvent &e = audit(trail, actor, clock_(), Id{}, "webhook.delete", "webhook",
                              id_to_string(kWebhookIdPrefix, id));
        e.change("url", w.url, nullptr);
        put_audit(r, m, trail);
        return w;
    });
}

DeliveryPage Store::list_deliveries(const Id &webhook, std::optional<DeliveryStatus> status, size_t limit,
                                    const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto r = backend_->read();
    if (!r->get(Table::kWebhooks, bytes(webhook))) no_webhook(webhook);
    const std::string own(bytes(webhook));
    const std::string start = after ? delivery_key(webhook, *after) : own;
    DeliveryPage page;
    r->scan(Table::kWebhookDeliveries, own, start, [&](std::string_view key, std::string_view v) {
        if (after && key == start) return true;
        Delivery d = delivery_from(key, v);
        if (status && d.status != *status) return true;
        if (page.deliveries.size() == limit) {
            page.next = page.deliveries.back().event;
            return false;
        }
        page.deliveries.push_back(std::move(d));
        return true;
    });
    return page;
}

size_t Store::fan_out_webhook_events(size_t limit) {
    {
        // the sender asks every second: a read answers "nothing" without
        // taking the writer's turn
        bool any = false;
        backend_->read()->scan(Table::kWebhookOutbox, "", "", [&](std::string_view, std::string_view) {
            any = true;
            return false;
        });
        if (!any) return 0;
    }
    return write([&](RecordReader &r, Mutation &m) {
        const std::vector<Webhook> hooks = read_webhooks(r);
        const int64_t now = clock_();
        size_t taken = 0, ops = 0;
        r.scan(Table::kWebhookOutbox, "", "", [&](std::string_view key, std::string_view v) {
            auto event = decode_outbox_event(key, v);
            std::vector<const Webhook *> to;
            if (event) {
                for (const Webhook &w : hooks) {
                    // an endpoint hears of what happened after it was made
                    if (w.created_ms <= event->at_ms && w.wants(event->type, event->account)) to.push_back(&w);
                }
            }
            const size_t cost = 2 + 2 * to.size();
            if (taken == limit || (taken > 0 && ops + cost > kFanOutOps)) return false;
            ops += cost;
            taken++;
            m.expect(Table::kWebhookOutbox, key, v);
            m.erase(Table::kWebhookOutbox, key);  // an unreadable one is dropped, not retried for ever
            if (!event) return true;
            const std::string body = event->body();
            for (const Webhook *w : to) {
                Delivery d;
                d.webhook = w->id;
                d.event = event->id;
                d.type = event->type;
                d.body = body;
                d.created_ms = event->at_ms;
                d.next_ms = now;
                m.expect(Table::kWebhookDeliveries, delivery_key(d.webhook, d.event), std::nullopt);
                m.put(Table::kWebhookDeliveries, delivery_key(d.webhook, d.event), encode_delivery(d));
                m.put(Table::kWebhookDue, due_key(d.next_ms, d.webhook, d.event), "");
            }
            return true;
        });
        return taken;
    });
}

std::vector<Delivery> Store::due_deliveries(int64_t now_ms, size_t limit) {
    auto r = backend_->read();
    std::vector<Delivery> out;
    r->scan(Table::kWebhookDue, "", "", [&](std::string_view key, std::string_view) {
        int64_t at = 0;
        Id webhook{}, event{};
        if (!parse_due_key(key, at, webhook, event)) return true;
        if (at > now_ms || out.size() == limit) return false;
        const std::string dk = delivery_key(webhook, event);
        if (auto v = r->get(Table::kWebhookDeliveries, dk)) out.push_back(delivery_from(dk, *v));
        return true;
    });
    return out;
}

bool Store::update_delivery(const Delivery &as_read, const DeliveryUpdate &update) {
    return write([&](RecordReader &r, Mutation &m) {
        const std::string key = delivery_key(as_read.webhook, as_read.event);
        auto v = r.get(Table::kWebhookDeliveries, key);
        if (!v || *v != encode_delivery(as_read)) return false;
        m.expect(Table::kWebhookDeliveries, key, *v);
        m.put(Table::kWebhookDeliveries, key, encode_delivery(update.next));
        if (as_read.status == DeliveryStatus::kPending)
            m.erase(Table::kWebhookDue, due_key(as_read.next_ms, as_read.webhook, as_read.event));
        if (update.next.status == DeliveryStatus::kPending)
            m.put(Table::kWebhookDue, due_key(update.next.next_ms, update.next.webhook, update.next.event), "");
        if (update.disable_webhook) {
            auto wv = r.get(Table::kWebhooks, bytes(as_read.webhook));
            if (wv) {
                Webhook w = webhook_from(bytes(as_read.webhook), *wv);
                if (!w.disabled_ms) {
                    const int64_t now = clock_();
                    w.disabled_ms = now;
                    m.expect(Table::kWebhooks, bytes(w.id), *wv);
                    m.put(Table::kWebhooks, bytes(w.id), encode_webhook(w));
                    std::vector<AuditEvent> trail;
                    AuditEvent &e = audit(trail, Actor::operator_named("webhook-sender"), now, Id{},
                                          "webhook.disable", "webhook", id_to_string(kWebhookIdPrefix, w.id));
                    e.change("status", "active", "disabled");
                    e.change("reason", nullptr, "the receiver answered 410 Gone");
                    put_audit(r, m, trail);
                }
            }
        }
        return true;
    });
}

void Store::drop_delivery(const Delivery &as_read) {
    write([&](RecordReader &r, Mutation &m) {
        const std::string key = delivery_key(as_read.webhook, as_read.event);
        auto v = r.get(Table::kWebhookDeliveries, key);
        if (v) {
            m.expect(Table::kWebhookDeliveries, key, *v);
            m.erase(Table::kWebhookDeliveries, key);
        }
        m.erase(Table::kWebhookDue, due_key(as_read.next_ms, as_read.webhook, as_read.event));
        return true;
    });
}

bool Store::emit_event_once(std::string_view mark, const OutboxEvent &event) {
    if (backend_->read()->get(Table::kWebhookMarks, mark)) return false;
    return write([&](RecordReader &r, Mutation &m) {
        if (r.get(Table::kWebhookMarks, mark)) return false;
        m.expect(Table::kWebhookMarks, mark, std::nullopt);
        std::string at(8, '\0');
        store_le<uint64_t>(reinterpret_cast<unsigned char *>(at.data()), static_cast<uint64_t>(event.at_ms));
        m.put(Table::kWebhookMarks, mark, at);
        m.expect(Table::kWebhookOutbox, bytes(event.id), std::nullopt);
        m.put(Table::kWebhookOutbox, bytes(event.id), encode_outbox_event(event));
        return true;
    });
}

size_t Store::prune_deliveries(int64_t before_ms, size_t limit) {
    limit = std::min<size_t>(limit, kFanOutOps);
    return write([&](RecordReader &r, Mutation &m) {
        std::set<Id> live;
        for (const Webhook &w : read_webhooks(r)) live.insert(w.id);
        size_t n = 0;
        r.scan(Table::kWebhookDeliveries, "", "", [&](std::string_view key, std::string_view v) {
            Delivery d = delivery_from(key, v);
            const bool settled = d.status != DeliveryStatus::kPending && d.finished_ms && *d.finished_ms < before_ms;
            const bool orphan = !live.count(d.webhook);
            if (!settled && !orphan) return true;
            m.expect(Table::kWebhookDeliveries, key, v);
            m.erase(Table::kWebhookDeliveries, key);
            if (d.status == DeliveryStatus::kPending) m.erase(Table::kWebhookDue, due_key(d.next_ms, d.webhook, d.event));
            return ++n < limit;
        });
        return n;
    });
}

WebhookQueueGauges Store::webhook_queue_gauges() {
    auto r = backend_->read();
    WebhookQueueGauges g;
    r->scan(Table::kWebhookDue, "", "", [&](std::string_view key, std::string_view) {
        int64_t at = 0;
        Id webhook{}, event{};
        if (!parse_due_key(key, at, webhook, event)) return true;
        g.pending++;
        const int64_t happened = id_time_ms(event.data());
        if (!g.oldest_pending_ms || happened < *g.oldest_pending_ms) g.oldest_pending_ms = happened;
        return true;
    });
    r->scan(Table::kWebhookOutbox, "", "", [&](std::string_view key, std::string_view) {
        g.outbox++;
        const int64_t happened =
            key.size() == KA_ID_LEN ? id_time_ms(reinterpret_cast<const unsigned char *>(key.data())) : 0;
        if (!g.oldest_pending_ms || happened < *g.oldest_pending_ms) g.oldest_pending_ms = happened;
        return true;
    });
    return g;
}

}  // namespace keyauth
