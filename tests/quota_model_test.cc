// Model-based test of quotas at the edge: random sequences of calls (static
// cost, free, metered with any reported cost, refused by the rate after the
// check), quota changes of keys and their account, and time landing on and
// across day and month boundaries, through the C API the nginx glue calls
// (ka_quota_check, ka_quota_charge), with several ledger handles on one file
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

// A subject's count is that of the period it was last charged in: a new
// period, or a quota whose period changed kind (day, month, credits),
// starts at 0; a change of units keeps it (SCHEMA.md, the quota ledger).
struct Model {
    Quotas key[kKeys];
    Quotas account;
    // by subject (0..kKeys-1 keys, kKeys the account): period tag, units
    std::map<int, std::pair<uint16_t, uint64_t>> used;

    uint64_t of(int subject, uint8_t period, int64_t now) const {
        if (period == KA_QUOTA_NONE) return 0;
        auto it = used.find(subject);
        return it != used.end() && it->second.first == quota_period_tag(period, now) ? it->second.second : 0;
    }
    void add(int subject, uint8_t period, int64_t now, uint64_t units) {
        if (period == KA_QUOTA_NONE || units == 0) return;  // nothing charged
        auto &u = used[subject];
        const uint16_t tag = quota_period_tag(period, now);
        if (u.first != tag) u = {tag, 0};
        u.second += units;
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

// One sequence; returns "" or what differed, with the steps so far.
std::string run_sequence(uint64_t seed, int steps) {
    std::mt19937_64 rng(seed);
    TempDir dir("/dev/shm");
    char err[256];
    std::vector<ka_quota_ledger_t *> workers;
    for (int w = 0; w < kWorkers; w++) {
        ka_quota_ledger_t *l = ka_quota_open(dir.path().c_str(), err, sizeof err);
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
    for (int step = 0; step < steps && failure.empty(); step++) {
        const int op = static_cast<int>(rng() % 100);
        if (op < 10) {  // time: a little, to a boundary's edge, or across it
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
        } else {  // a call
            const int k = static_cast<int>(rng() % kKeys);
            const int w = static_cast<int>(rng() % kWorkers);
            const bool metered = rng() % 3 == 0;
            const uint64_t cost = rng() % 4 == 0 ? 0 : 1 + rng() % 3;
            const uint64_t reported = rng() % 8;
            const bool rate_admits = rng() % 6 != 0;
            const uint64_t need = metered ? 1 : cost;
            log << step << ": call key " << k << " worker " << w << (metered ? " metered " : " cost ")
                << (metered ? reported : cost) << (rate_admits ? "" : " (rate refuses)") << "\n";

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
            if (want == KA_QUOTA_ADMIT && rate_admits) {
                const uint64_t charge = metered ? reported : cost;
                if (ka_quota_charge(workers[w], &a, &q, charge, metered ? 0 : 1, now) != 1) {
                    failure = "a charge that fits was refused";
                    break;
                }
                for (int i = 0; i < 2; i++) m.add(subjects[i], qs[i]->period, now, charge);
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
