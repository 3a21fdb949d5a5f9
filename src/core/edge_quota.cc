// The quota half of the C API in keyauth_core.h: the ledger's check and
// charge for one request of an authenticated key.
#include <cstdio>
#include <memory>
#include <string>

#include "keyauth_core.h"
#include "quota_ledger.h"
#include "usage_env.h"

using keyauth::QuotaLedger;
using keyauth::QuotaRef;
using keyauth::QuotaSubject;

struct ka_quota_ledger_s {
    std::unique_ptr<QuotaLedger> ledger;
    keyauth::PeriodClock clock;
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

ka_quota_ledger_t *ka_quota_open(const char *dir, char *err, size_t err_len) {
    try {
        std::string why;
        std::unique_ptr<ka_quota_ledger_t> l(new ka_quota_ledger_t());
        if (!keyauth::ensure_usage_dir(dir, why)) {
            snprintf(err, err_len, "%s", why.c_str());
            return nullptr;
        }
        l->ledger = QuotaLedger::open(std::string(dir) + "/" KA_QUOTA_LEDGER_FILE, true, why);
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
        if (!ledger->ledger->find(subject_of(i), id_of(key, i), now_ms, ref)) {
            unavailable(out, "the quota ledger has no room for another key or account");
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
