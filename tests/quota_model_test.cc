// Model-based test of quotas at the edge: random sequences of calls (static
// cost, free, metered: admitted with their cost reserved, in flight while
// other calls come, then settled with any reported cost; refused by the rate
// after the check), quota changes of keys and their account (a period kind
// changed and back finds its use), and time landing on and across day and
// month boundaries, through the C API the nginx glue calls (ka_quota_check,
// ka_quota_charge, ka_quota_settle), with several ledger handles on one file
// standing for the workers. After every step the verdict and each subject's
// use must equal a small reference model's. Seeded and replayable:
// KEYAUTH_QUOTA_SEED=N runs one sequence, KEYAUTH_QUOTA_SEQUENCES how many.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "keyauth_core.h"
#include "quota_ledger.h"
#include "quota_period.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

constexpr int kWorkers = 3;
constexpr int kKeys = 2;
// 2026-11-30T23:59:50Z: ten seconds before a day's and a month's end.
constexpr int64_t kStart = 1796083190000;

struct Quotas {
    uint8_t period = KA_QUOTA_NONE;
    uint64_t units = 0;
};

// What each subject used in each period: a unit is charged once, in the
// period it was charged in, and a quota whose period changes kind (day,
// month, credits) and back finds the use it had in that period (#44).
struct Model {
    Quotas key[kKeys];
    Quotas account;
    // by subject (0..kKeys-1 keys, kKeys the account) and period tag: units
    std::map<std::pair<int, uint16_t>, uint64_t> used;

    uint64_t of(int subject, uint8_t period, int64_t now) const {
        if (period == KA_QUOTA_NONE) return 0;
        auto it = used.find({subject, quota_period_tag(period, now)});
        return it != used.end() ? it->second : 0;
    }
    void add(int subject, uint8_t period, int64_t now, uint64_t units) {
        if (period == KA_QUOTA_NONE || units == 0) return;  // nothing charged
        used[{subject, quota_period_tag(period, now)}] += units;
    }
};

ka_auth_result_t auth_for(const Model &m, int k) {
    ka_auth_result_t a;
    std::memset(&a, 0, sizeof a);
    a.verdict = KA_AUTH_OK;
    a.rate_id_bin[11] = static_cast<unsigned char>(k + 1);
    a.rate_id_bin[6] = 0x4b;
    std::memcpy(a.key_id_bin, a.rate_id_bin, sizeof a.key_id_bin);
    a.account_id_bin[11] = 0x77;
    a.account_id_bin[6] = 0xac;
    a.key_quota_period = m.key[k].period;
    a.key_quota_units = m.key[k].units;
    a.account_quota_period = m.account.period;
    a.account_quota_units = m.account.units;
    return a;
}

uint64_t ledger_used(QuotaLedger &view, const ka_auth_result_t &a, int policy, uint8_t period,
                     int64_t now) {
    if (period == KA_QUOTA_NONE) return 0;
    const unsigned char *id = policy == KA_QUOTA_KEY ? a.rate_id_bin : a.account_id_bin;
    return view.used(policy == KA_QUOTA_KEY ? QuotaSubject::kKey : QuotaSubject::kAccount, id,
                     quota_period_tag(period, now));
}

Quotas random_quota(std::mt19937_64 &rng, bool total_ok) {
    static const uint8_t kPeriods[] = {KA_QUOTA_NONE, KA_QUOTA_DAY, KA_QUOTA_MONTH, KA_QUOTA_TOTAL};
    Quotas q;
    q.period = kPeriods[rng() % (total_ok ? 4 : 3)];
    q.units = q.period == KA_QUOTA_NONE ? 0 : 1 + rng() % 12;
    return q;
}

// A metered call admitted and not yet answered: what the edge reserved,
// where, and what its upstream will report.
struct InFlight {
    int key;
    int worker;
    ka_auth_result_t auth;
    ka_quota_result_t quota;
    uint64_t reserved;
    uint64_t reported;
    // the model's: the subjects and periods the reservation went to
    int subjects[2];
    uint8_t periods[2];
    int64_t admitted_at;
};

// One sequence; returns "" or what differed, with the steps so far.
std::string run_sequence(uint64_t seed, int steps) {
    std::mt19937_64 rng(seed);
    TempDir dir("/dev/shm");
    char err[256];
    std::vector<ka_quota_ledger_t *> workers;
    for (int w = 0; w < kWorkers; w++) {
        ka_quota_ledger_t *l = ka_quota_open(dir.path().c_str(), 0, err, sizeof err);
        if (l == nullptr) return std::string("ka_quota_open: ") + err;
        workers.push_back(l);
    }
    std::string why;
    auto view = QuotaLedger::open(dir.sub(KA_QUOTA_LEDGER_FILE), false, why);
    if (!view) return why;

    Model m;
    int64_t now = kStart;
    std::ostringstream log;
    std::string failure;
    std::vector<InFlight> flying;

    // The answer of an in-flight call arrives: the difference between what
    // it reported and what was reserved is charged or given back, in the
    // periods of the reservation.
    auto settle = [&](size_t i, int step) {
        InFlight &f = flying[i];
        log << step << ": answer of key " << f.key << " reports " << f.reported << " (reserved "
            << f.reserved << ")\n";
        ka_quota_settle(workers[f.worker], &f.auth, &f.quota, f.reserved, f.reported, now);
        for (int j = 0; j < 2; j++) {
            if (f.periods[j] == KA_QUOTA_NONE) continue;
            auto &u = m.used[{f.subjects[j], quota_period_tag(f.periods[j], f.admitted_at)}];
            if (f.reported >= f.reserved) {
                u += f.reported - f.reserved;
            } else {
                const uint64_t back = f.reserved - f.reported;
                u = u > back ? u - back : 0;
            }
        }
        flying.erase(flying.begin() + static_cast<std::ptrdiff_t>(i));
    };

    for (int step = 0; step < steps && failure.empty(); step++) {
        const int op = static_cast<int>(rng() % 100);
        if (op < 10) {  // time: a little, to a boundary's edge, or across it
            // answers in flight arrive first (a slot keeps one period of a
            // class: SCHEMA.md)
            while (!flying.empty()) settle(0, step);
            const int how = static_cast<int>(rng() % 4);
            const uint8_t p = rng() % 2 ? KA_QUOTA_DAY : KA_QUOTA_MONTH;
            const int64_t end = quota_period_end_ms(p, now);
            now = how == 0 ? now + static_cast<int64_t>(rng() % 5000)
                : how == 1 ? end - 1
                : how == 2 ? end
                           : end + static_cast<int64_t>(rng() % 86400000);
            log << step << ": time " << now << "\n";
        } else if (op < 18) {
            const int k = static_cast<int>(rng() % kKeys);
            m.key[k] = random_quota(rng, true);
            log << step << ": key " << k << " quota " << quota_period_name(m.key[k].period) << " "
                << m.key[k].units << "\n";
        } else if (op < 24) {
            m.account = random_quota(rng, false);
            log << step << ": account quota " << quota_period_name(m.account.period) << " "
                << m.account.units << "\n";
        } else if (op < 34) {
            if (!flying.empty()) settle(static_cast<size_t>(rng() % flying.size()), step);
        } else {  // a call
            const int k = static_cast<int>(rng() % kKeys);
            const int w = static_cast<int>(rng() % kWorkers);
            const bool metered = rng() % 3 == 0;
            const uint64_t cost = rng() % 4 == 0 ? 0 : 1 + rng() % 3;
            const uint64_t reported = rng() % 8;
            const bool rate_admits = rng() % 6 != 0;
            // a metered call reserves its location's cost, at least a unit
            const uint64_t need = metered ? (cost > 0 ? cost : 1) : cost;
            log << step << ": call key " << k << " worker " << w << " cost " << cost
                << (metered ? " metered, will report " + std::to_string(reported) : std::string())
                << (rate_admits ? "" : " (rate refuses)") << "\n";

            // the model
            const Quotas *qs[2] = {&m.key[k], &m.account};
            const int subjects[2] = {k, kKeys};
            ka_quota_verdict_e want = KA_QUOTA_FREE;
            int want_refused = -1;
            for (int i = 0; i < 2; i++) {
                if (qs[i]->period == KA_QUOTA_NONE) continue;
                const uint64_t u = m.of(subjects[i], qs[i]->period, now);
                if (need > 0 && want_refused < 0 && (u >= qs[i]->units || need > qs[i]->units - u)) {
                    want_refused = i;
                }
                want = KA_QUOTA_ADMIT;
            }
            if (want_refused >= 0) want = KA_QUOTA_EXCEEDED;

            // the edge
            ka_auth_result_t a = auth_for(m, k);
            ka_quota_result_t q;
            ka_quota_check(workers[w], &a, need, now, &q);
            if (q.verdict != want || (want == KA_QUOTA_EXCEEDED && q.refused != want_refused)) {
                std::ostringstream f;
                f << "verdict " << q.verdict << " (refused " << q.refused << "), model " << want
                  << " (refused " << want_refused << ")";
                failure = f.str();
                break;
            }
            if (want == KA_QUOTA_ADMIT && rate_admits && need > 0) {
                if (ka_quota_charge(workers[w], &a, &q, need, 1, now) != 1) {
                    failure = "a charge that fits was refused";
                    break;
                }
                for (int i = 0; i < 2; i++) m.add(subjects[i], qs[i]->period, now, need);
                if (metered) {
                    flying.push_back(InFlight{k, w, a, q, need, reported, {subjects[0], subjects[1]},
                                              {qs[0]->period, qs[1]->period}, now});
                }
            }
            for (int i = 0; i < 2; i++) {
                const uint64_t got = ledger_used(*view, a, i, qs[i]->period, now);
                const uint64_t exp = m.of(subjects[i], qs[i]->period, now);
                if (got != exp) {
                    std::ostringstream f;
                    f << (i == 0 ? "key" : "account") << " used " << got << ", model " << exp;
                    failure = f.str();
                }
            }
        }
    }
    for (auto *l : workers) ka_quota_close(l);
    if (failure.empty()) return "";
    return "seed " + std::to_string(seed) + ": " + failure + "\nsteps:\n" + log.str();
}

uint64_t env_u64(const char *name, uint64_t fallback) {
    const char *v = std::getenv(name);
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

}  // namespace

TEST(QuotaModel, EdgeDecisionsMatchTheModelAcrossPeriodsAndWorkers) {
    const char *one = std::getenv("KEYAUTH_QUOTA_SEED");
    const uint64_t first = one && *one ? env_u64("KEYAUTH_QUOTA_SEED", 1) : 1;
    const uint64_t count = one && *one ? 1 : env_u64("KEYAUTH_QUOTA_SEQUENCES", 400);
    for (uint64_t seed = first; seed < first + count; seed++) {
        const std::string failure = run_sequence(seed, 80);
        ASSERT_EQ(failure, "") << "replay with KEYAUTH_QUOTA_SEED=" << seed;
    }
}
