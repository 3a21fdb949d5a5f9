// The audit trail: the event each write records, its id, and the reads of
// the trail (one account's, or every event).
#include <algorithm>
#include <map>

#include "keyauth_schema.h"
#include "store.h"
#include "store_internal.h"
#include "webhook_events.h"

namespace keyauth {
namespace store_detail {

AuditEvent &audit(std::vector<AuditEvent> &events, const Actor &actor, int64_t now, const Id &account,
                  const char *action, const char *target_type, std::string target_id) {
    AuditEvent &e = events.emplace_back();
    e.account = account;
    e.at_ms = now;
    e.actor = actor;
    e.action = action;
    e.target_type = target_type;
    e.target_id = std::move(target_id);
    return e;
}

// Event ids sort in the order of an account's writes, also within one
// millisecond: each steps past the newest id in that trail (the first of
// its range, ids being stored inverted). Two writers that picked the same
// id collide on the guard and one computes its write again.
void put_audit(RecordReader &r, Mutation &m, std::vector<AuditEvent> &events) {
    // a write's events in their order, also within one millisecond: each
    // steps past the one before it in the same trail (not yet in the store)
    std::map<Id, Id> written;
    auto step_past = [](Id &id, const Id &newest) {
        if (newest < id) return;
        id = newest;
        for (size_t i = id.size(); i-- > 0 && ++id[i] == 0;) {
        }
    };
    for (AuditEvent &e : events) {
        e.id = generate_id(e.at_ms);
        const std::string trail = audit_key(e.account, Id{}).substr(0, KA_ID_LEN);
        r.scan(Table::kAudit, trail, trail, [&](std::string_view key, std::string_view v) {
            auto newest = decode_audit_record(key, v);
            if (newest) step_past(e.id, newest->id);
            return false;
        });
        if (auto before = written.find(e.account); before != written.end()) step_past(e.id, before->second);
        written[e.account] = e.id;
        const std::string key = audit_key(e.account, e.id);
        m.expect(Table::kAudit, key, std::nullopt);
        m.put(Table::kAudit, key, encode_audit_record(e));
        // the webhooks' outbox: the event is in the store exactly when the
        // change is (webhook_events.h)
        if (auto event = outbox_event_from(e)) {
            m.expect(Table::kWebhookOutbox, bytes(e.id), std::nullopt);
            m.put(Table::kWebhookOutbox, bytes(e.id), encode_outbox_event(*event));
        }
    }
}

}  // namespace store_detail

using namespace store_detail;

// Audit keys hold the event id inverted (audit.cc), so a forward scan of an
// account's range reads its events newest first.
AuditPage Store::list_audit(const std::optional<Id> &account, size_t limit, const std::optional<Id> &after) {
    limit = std::clamp<size_t>(limit, 1, kMaxPageSize);
    auto r = backend_->read();
    AuditPage page;
    auto take = [&](std::string_view key, std::string_view v) {
        auto e = decode_audit_record(key, v);
        if (!e) corrupt("unreadable audit event");
        return *e;
    };
    if (account) {
        const std::string owner(bytes(*account));
        const std::string start = after ? audit_key(*account, *after) : owner;
        r->scan(Table::kAudit, owner, start, [&](std::string_view key, std::string_view v) {
            if (after && key == start) return true;
            if (key.substr(0, KA_ID_LEN) != owner) return false;
            if (page.events.size() == limit) {
                page.next = page.events.back().id;
                return false;
            }
            page.events.push_back(take(key, v));
            return true;
        });
        return page;
    }
    // Every account's trail: read all, newest first (an operator's query).
    std::vector<AuditEvent> all;
    r->scan(Table::kAudit, "", "", [&](std::string_view key, std::string_view v) {
        all.push_back(take(key, v));
        return true;
    });
    std::sort(all.begin(), all.end(), [](const AuditEvent &a, const AuditEvent &b) { return a.id > b.id; });
    size_t from = 0;
    if (after) {
        while (from < all.size() && all[from].id >= *after) from++;
    }
    for (size_t i = from; i < all.size() && page.events.size() < limit; i++) page.events.push_back(all[i]);
    if (from + page.events.size() < all.size() && !page.events.empty()) page.next = page.events.back().id;
    return page;
}

}  // namespace keyauth
