// The quota half of the C API in keyauth_core.h: the ledger's check and
// charge for one request of an authenticated key.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "edge.h"
#include "keyauth_core.h"
#include "quota_ledger.h"
#include "records.h"
#include "usage_env.h"

using keyauth::QuotaLedger;
using keyauth::QuotaRef;
using keyauth::QuotaSubject;

struct ka_quota_ledger_s {
    std::unique_ptr<QuotaLedger> ledger;
    keyauth::PeriodClock clock;
    // the sweep under way (ka_quota_tend): where it is, what it counted
    uint64_t sweep_at = 0;
    uint64_t sweep_live = 0;
    uint64_t sweep_released = 0;
};

namespace {

QuotaRef ref_of(const ka_quota_policy_t &p) {
    return QuotaRef{static_cast<uint64_t *>(p.word), static_cast<uint32_t *>(p.seq), p.seen};
}

void keep_ref(ka_quota_policy_t &p, const QuotaRef &r) {
    p.word = r.word;
    p.seq = r.seq;
    p.seen = r.seen;
}

QuotaSubject subject_of(int i) { return i == KA_QUOTA_KEY ? QuotaSubject::kKey : QuotaSubject::kAccount; }

// The key's quota is counted under its rate id: a rolled key goes on
// spending its predecessor's.
const unsigned char *id_of(const ka_auth_result_t *key, int i) {
    return i == KA_QUOTA_KEY ? key->rate_id_bin : key->account_id_bin;
}

void unavailable(ka_quota_result_t *out, const char *why) {
    out->verdict = KA_QUOTA_UNAVAILABLE;
    snprintf(out->reason, sizeof out->reason, "%s", why);
}

void check(ka_quota_ledger_t *ledger, const ka_auth_result_t *key, uint64_t need, int64_t now_ms,
           ka_quota_result_t *out);

}  // namespace

extern "C" {

ka_quota_ledger_t *ka_quota_open(const char *dir, uint64_t slots, char *err, size_t err_len) {
    try {
        std::string why;
        std::unique_ptr<ka_quota_ledger_t> l(new ka_quota_ledger_t());
        if (!keyauth::ensure_usage_dir(dir, why)) {
            snprintf(err, err_len, "%s", why.c_str());
            return nullptr;
        }
        l->ledger = QuotaLedger::open(std::string(dir) + "/" KA_QUOTA_LEDGER_FILE, true, why, slots);
        if (!l->ledger) {
            snprintf(err, err_len, "%s", why.c_str());
            return nullptr;
        }
        return l.release();
    } catch (...) {
        snprintf(err, err_len, "out of memory opening the quota ledger");
    }
    return nullptr;
}

void ka_quota_close(ka_quota_ledger_t *ledger) { delete ledger; }

int ka_quota_sync(ka_quota_ledger_t *ledger, char *err, size_t err_len) {
    try {
        std::string why;
        if (ledger->ledger->sync(why)) return 0;
        snprintf(err, err_len, "%s", why.c_str());
    } catch (...) {
        snprintf(err, err_len, "out of memory syncing the quota ledger");
    }
    return -1;
}

void ka_quota_check(ka_quota_ledger_t *ledger, const ka_auth_result_t *key, uint64_t need,
                    int64_t now_ms, ka_quota_result_t *out) {
    check(ledger, key, need, now_ms, out);
    if (need == 0 && out->verdict == KA_QUOTA_UNAVAILABLE) {
        // A free call is refused nothing for want of a ledger: it shows none.
        for (auto &p : out->policy) p.period = KA_QUOTA_NONE;
        out->verdict = KA_QUOTA_FREE;
    }
}

}  // extern "C"

namespace {

void check(ka_quota_ledger_t *ledger, const ka_auth_result_t *key, uint64_t need, int64_t now_ms,
           ka_quota_result_t *out) {
    out->verdict = KA_QUOTA_FREE;
    out->refused = KA_QUOTA_KEY;
    out->unmetered = 0;
    out->reason[0] = '\0';
    if (key->key_quota_period == KA_QUOTA_NONE && key->account_quota_period == KA_QUOTA_NONE) {
        out->policy[0].period = out->policy[1].period = KA_QUOTA_NONE;  // the common case
        return;
    }
    keyauth::PeriodClock fallback;
    keyauth::PeriodClock &clock = ledger ? ledger->clock : fallback;
    const uint8_t periods[2] = {key->key_quota_period, key->account_quota_period};
    const uint64_t units[2] = {key->key_quota_units, key->account_quota_units};
    for (int i = 0; i < 2; i++) {
        ka_quota_policy_t &p = out->policy[i];
        p = ka_quota_policy_t{};
        p.period = periods[i];
        if (p.period == KA_QUOTA_NONE) continue;
        p.units = units[i];
        const keyauth::PeriodClock::Period &at = clock.at(p.period, now_ms);
        p.tag = at.tag;
        p.reset_s = at.end_ms < 0 ? -1 : (at.end_ms - now_ms + 999) / 1000;
        p.window_s = at.seconds;
        if (out->verdict == KA_QUOTA_UNAVAILABLE) continue;
        if (ledger == nullptr) {
            unavailable(out, "no quota ledger: quotas need keyauth_usage_db");
            continue;
        }
        QuotaRef ref;
        if (!ledger->ledger->find(subject_of(i), id_of(key, i), p.tag, now_ms, ref)) {
            // No room even after growing (a disk that is full, the largest
            // ledger): this quota goes uncounted for the call rather than
            // refuse a subject that did nothing wrong; counted in the
            // ledger's no_room, logged by the glue.
            p.period = KA_QUOTA_NONE;
            out->unmetered = 1;
            continue;
        }
        keep_ref(p, ref);
        p.used = QuotaLedger::used_in(ref, p.tag);
        if (need == 0) {
            out->verdict = KA_QUOTA_ADMIT;  // shown, never refused
        } else if (out->verdict != KA_QUOTA_EXCEEDED &&
                   (p.used >= p.units || need > p.units - p.used)) {
            out->verdict = KA_QUOTA_EXCEEDED;
            out->refused = i;
        } else if (out->verdict == KA_QUOTA_FREE) {
            out->verdict = KA_QUOTA_ADMIT;
        }
    }
}

}  // namespace

extern "C" {

int ka_quota_charge(ka_quota_ledger_t *ledger, const ka_auth_result_t *key, ka_quota_result_t *q,
                    uint64_t cost, int fit, int64_t now_ms) {
    if (q->verdict != KA_QUOTA_ADMIT || ledger == nullptr || cost == 0) return 1;
    bool charged[2] = {false, false};
    for (int i = 0; i < 2; i++) {
        ka_quota_policy_t &p = q->policy[i];
        if (p.period == KA_QUOTA_NONE) continue;
        QuotaRef ref = ref_of(p);
        uint64_t used = 0;
        QuotaLedger::Charge c = ledger->ledger->charge(subject_of(i), id_of(key, i), ref, p.tag,
                                                       cost, p.units, fit != 0, now_ms, &used,
                                                       &p.tag);
        keep_ref(p, ref);
        p.used = used;
        if (c == QuotaLedger::Charge::kCharged) {
            charged[i] = true;
            continue;
        }
        // Another worker took the last units since the check: nothing is
        // charged for this call.
        for (int j = 0; j < i; j++) {
            if (!charged[j]) continue;
            QuotaLedger::refund(ref_of(q->policy[j]), q->policy[j].tag, cost);
            q->policy[j].used -= q->policy[j].used >= cost ? cost : q->policy[j].used;
        }
        q->verdict = KA_QUOTA_EXCEEDED;
        q->refused = i;
        return 0;
    }
    return 1;
}

void ka_quota_settle(ka_quota_ledger_t *ledger, const ka_auth_result_t *key, ka_quota_result_t *q,
                     uint64_t reserved, uint64_t reported, int64_t now_ms) {
    if (q->verdict != KA_QUOTA_ADMIT || ledger == nullptr || reported == reserved) return;
    if (reported > reserved) {
        // the balance may go below zero: the next call waits for the period
        (void)ka_quota_charge(ledger, key, q, reported - reserved, 0, now_ms);
        return;
    }
    const uint64_t back = reserved - reported;
    for (ka_quota_policy_t &p : q->policy) {
        if (p.period == KA_QUOTA_NONE) continue;
        QuotaLedger::refund(ref_of(p), p.tag, back);
        p.used -= p.used >= back ? back : p.used;
    }
}

void ka_quota_stats(ka_quota_ledger_t *ledger, ka_quota_stats_t *out) {
    std::memset(out, 0, sizeof *out);
    if (ledger == nullptr) return;
    ledger->ledger->refresh();
    out->slots = ledger->ledger->slots();
    out->live = ledger->ledger->live_slots();
    out->in_use = ledger->ledger->slots_in_use();
    out->no_room = ledger->ledger->no_room();
}

int64_t ka_quota_parse_cost(const char *text, size_t len) {
    if (len == 0 || len > 10) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9') return -1;
        v = v * 10 + (text[i] - '0');
    }
    return v <= KA_QUOTA_MAX_COST ? v : -1;
}

}  // extern "C"

namespace {

// Whether a key's quota (kept under its chain's first key id) can never be
// charged again: every key of the chain is revoked, or a predecessor past
// its grace, and the newest is revoked (an expired key may be given a new
// expiry, so its credits stay). A key the store no longer has is dead; a
// store that cannot say (an older schema, an error) keeps the quota.
bool chain_dead(keyauth::EdgeStore::Snapshot &snap, const unsigned char *rate_id, int64_t now_ms) {
    unsigned char id[KA_ID_LEN];
    std::memcpy(id, rate_id, KA_ID_LEN);
    for (int step = 0; step < 64; step++) {
        std::string_view record;
        const int rc = snap.key_record_by_id(id, record);
        if (rc == MDB_NOTFOUND) return true;
        keyauth::KeyRecordView k;
        if (rc != 0 || keyauth::decode_key_record(record.data(), record.size(), k) != keyauth::DecodeStatus::kOk)
            return false;
        static const unsigned char kNone[KA_ID_LEN] = {};
        const bool newest = k.rolled_to == nullptr || std::memcmp(k.rolled_to, kNone, KA_ID_LEN) == 0;
        if (newest) return k.status == KA_KEY_REVOKED;
        const bool over = k.status == KA_KEY_REVOKED || (k.expires_ms != 0 && now_ms >= k.expires_ms);
        if (!over) return false;  // a predecessor in its grace
        std::memcpy(id, k.rolled_to, KA_ID_LEN);
    }
    return false;
}

}  // namespace

extern "C" int ka_quota_tend(ka_quota_ledger_t *ledger, ka_edge_t *edge, int64_t now_ms,
                             ka_quota_tend_t *out) {
    out->walked = 0;
    out->grew = 0;
    out->released = 0;
    out->err[0] = '\0';
    if (ledger == nullptr) return 0;
    try {
        QuotaLedger &l = *ledger->ledger;
        l.refresh();
        std::unique_ptr<keyauth::EdgeStore::Snapshot> snap;
        if (edge != nullptr && edge->store) {
            snap.reset(new keyauth::EdgeStore::Snapshot(*edge->store));
            if (snap->begin() != 0) snap.reset();
        }
        ledger->sweep_at = l.sweep_part(ledger->sweep_at, KA_QUOTA_SWEEP_PART, now_ms, &ledger->sweep_live,
                                        &ledger->sweep_released, [&](const unsigned char *id) {
                                            return snap && chain_dead(*snap, id, now_ms);
                                        });
        out->released = ledger->sweep_released;
        if (ledger->sweep_at < l.slots()) return 0;
        // a whole walk: its count is the ledger's, and three quarters live
        // grows it, before a subject's window finds no room
        out->walked = 1;
        out->live = ledger->sweep_live;
        l.set_live_slots(ledger->sweep_live);
        const uint64_t slots = l.slots();
        ledger->sweep_at = ledger->sweep_live = ledger->sweep_released = 0;
        if (out->live * 4 > slots * 3 && slots < QuotaLedger::kMaxSlots) {
            std::string why;
            if (!l.grow(slots * 2, why)) {
                snprintf(out->err, sizeof out->err, "%s", why.c_str());
                return -1;
            }
            out->grew = 1;
        }
        return 0;
    } catch (...) {
        snprintf(out->err, sizeof out->err, "out of memory tending the quota ledger");
    }
    return -1;
}
