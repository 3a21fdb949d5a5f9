#include "webhook_watch.h"

#include "key_rules.h"
#include "quota_period.h"
#include "rfc3339.h"
#include "webhook_events.h"

namespace keyauth {
namespace {

constexpr int64_t kDay = 86400 * 1000LL;
constexpr int kThresholds[] = {80, 100};
constexpr size_t kPage = 500;

nlohmann::json period_start(uint8_t period, int64_t now_ms) {
    const int64_t end = quota_period_end_ms(period, now_ms);
    if (end < 0) return nullptr;
    return format_time(end - quota_period_seconds(period, now_ms) * 1000);
}

// Emits the thresholds `used` of `quota` has reached.
void thresholds_of(Store &store, const Quota &quota, uint64_t used, const Id &account, const KeyRecord *key,
                   const std::string &subject, int64_t now_ms, WatchPass &pass) {
    for (int t : kThresholds) {
        // used/units >= t/100, in integers
        if (used * 100 < quota.units * static_cast<uint64_t>(t)) break;
        OutboxEvent e;
        e.at_ms = now_ms;
        e.id = generate_id(now_ms);
        e.type = kQuotaThreshold;
        e.account = account;
        e.data = {{"accountId", id_to_string(kAccountIdPrefix, account)},
                  {"keyId", key ? nlohmann::json(id_to_string(kKeyIdPrefix, key->key_id)) : nlohmann::json(nullptr)},
                  {"period", quota_period_name(quota.period)},
                  {"periodStart", period_start(quota.period, now_ms)},
                  {"units", quota.units},
                  {"used", used},
                  {"threshold", t}};
        if (store.emit_event_once(quota_mark(subject, quota.period, now_ms, t), e)) pass.emitted++;
    }
}

void expiring_of(Store &store, const KeyRecord &key, int64_t now_ms, WatchPass &pass) {
    const int64_t left = key.expires_ms - now_ms;
    for (const auto &[ahead, window] : {std::pair<const char *, int64_t>{"7d", 7 * kDay}, {"1d", kDay}}) {
        if (left > window) continue;
        OutboxEvent e;
        e.at_ms = now_ms;
        e.id = generate_id(now_ms);
        e.type = kKeyExpiring;
        e.account = key.account_id;
        e.data = {{"accountId", id_to_string(kAccountIdPrefix, key.account_id)},
                  {"keyId", id_to_string(kKeyIdPrefix, key.key_id)},
                  {"name", key.name},
                  {"expiresAt", format_time(key.expires_ms)},
                  {"within", ahead}};
        if (store.emit_event_once(expiring_mark(id_to_string(kKeyIdPrefix, key.key_id), key.expires_ms, ahead), e))
            pass.emitted++;
    }
}

}  // namespace

std::string quota_mark(const std::string &subject, uint8_t period, int64_t now_ms, int threshold) {
    return "quota/" + subject + "/" + std::to_string(quota_period_tag(period, now_ms)) + "/" +
           std::to_string(threshold);
}

std::string expiring_mark(const std::string &key, int64_t expires_ms, const char *ahead) {
    return "expiring/" + key + "/" + std::to_string(expires_ms) + "/" + ahead;
}

WatchPass watch_pass(Store &store, QuotaUsageSource *usage, int64_t now_ms, bool thresholds, bool expiring) {
    WatchPass pass;
    if (!usage) thresholds = false;
    if (!thresholds && !expiring) return pass;
    std::optional<Id> after;
    do {
        AccountPage page = store.list_accounts_page(kPage, after);
        after = page.next;
        for (const Account &a : page.accounts) {
            pass.accounts++;
            if (thresholds) {
                auto on_plan = store.find_account_on_plan(a.id);
                if (on_plan && !on_plan->effective.quota.none()) {
                    const Quota &q = on_plan->effective.quota;
                    thresholds_of(store, q, usage->used(QuotaSubject::kAccount, a.id, q.period, now_ms), a.id,
                                  nullptr, id_to_string(kAccountIdPrefix, a.id), now_ms, pass);
                }
            }
            std::optional<Id> key_after;
            do {
                KeyPage keys = store.list_keys(a.id, kPage, key_after);
                key_after = keys.next;
                for (const KeyRecord &k : keys.keys) {
                    pass.keys++;
                    if (!key_active(k, now_ms)) continue;
                    // a rolled predecessor's end is its grace, not an expiry
                    if (expiring && k.expires_ms > now_ms && is_none(k.rolled_to)) expiring_of(store, k, now_ms, pass);
                    if (thresholds && !k.quota.none()) {
                        const Id &subject = quota_subject_id(k);
                        thresholds_of(store, k.quota, usage->used(QuotaSubject::kKey, subject, k.quota.period, now_ms),
                                      a.id, &k, id_to_string(kKeyIdPrefix, subject), now_ms, pass);
                    }
                }
            } while (key_after);
        }
    } while (after);
    return pass;
}

}  // namespace keyauth
