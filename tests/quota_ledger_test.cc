// The quota ledger and its calendar: periods, charges that fit or overshoot,
// many processes charging one quota, slots reused only once their period is
// over, and a read-only view (keyauthd's).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "keyauth_core.h"
#include "quota_ledger.h"
#include "quota_period.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

// 2026-11-30T23:59:59.999Z and the instant after it.
constexpr int64_t kLastMsOfNovember = 1796083199999;
constexpr int64_t kDecemberFirst = 1796083200000;

std::array<unsigned char, KA_ID_LEN> id_of(uint64_t n) {
    std::array<unsigned char, KA_ID_LEN> id{};
    for (int i = 0; i < 8; i++) id[KA_ID_LEN - 1 - i] = static_cast<unsigned char>(n >> (8 * i));
    return id;
}

}  // namespace

TEST(QuotaPeriod, CalendarUtcBoundaries) {
    EXPECT_EQ(quota_period_end_ms(KA_QUOTA_MONTH, kLastMsOfNovember), kDecemberFirst);
    EXPECT_EQ(quota_period_end_ms(KA_QUOTA_DAY, kLastMsOfNovember), kDecemberFirst);
    EXPECT_NE(quota_period_tag(KA_QUOTA_MONTH, kLastMsOfNovember),
              quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst));
    EXPECT_EQ(quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst),
              quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst + 30LL * 86400000 + 86399999));
    EXPECT_EQ(quota_period_seconds(KA_QUOTA_MONTH, kLastMsOfNovember), 30 * 86400);
    EXPECT_EQ(quota_period_seconds(KA_QUOTA_MONTH, kDecemberFirst), 31 * 86400);
    // February of a leap year, and the year's turn.
    const int64_t feb_2028 = 1832976000000;  // 2028-02-01T00:00:00Z
    EXPECT_EQ(quota_period_seconds(KA_QUOTA_MONTH, feb_2028), 29 * 86400);
    const int64_t dec_31_2026 = 1798675200000;  // 2026-12-31T00:00:00Z
    EXPECT_EQ(quota_period_end_ms(KA_QUOTA_MONTH, dec_31_2026), 1798761600000);  // 2027-01-01
    EXPECT_EQ(quota_period_end_ms(KA_QUOTA_TOTAL, dec_31_2026), -1);
    EXPECT_EQ(quota_period_tag(KA_QUOTA_TOTAL, 0), quota_period_tag(KA_QUOTA_TOTAL, dec_31_2026));
    EXPECT_NE(quota_period_tag(KA_QUOTA_DAY, dec_31_2026), quota_period_tag(KA_QUOTA_MONTH, dec_31_2026));
}

TEST(QuotaLedger, ChargesFitThenOvershootOnlyWhenMetered) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, 1024);
    ASSERT_TRUE(l) << err;
    const auto id = id_of(7);
    QuotaRef ref;
    const uint16_t nov = quota_period_tag(KA_QUOTA_MONTH, kLastMsOfNovember);
    ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), nov, kLastMsOfNovember, ref));
    uint64_t used = 0;
    EXPECT_EQ(l->charge(QuotaSubject::kKey, id.data(), ref, nov, 60, 100, true, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(used, 60u);
    EXPECT_EQ(l->charge(QuotaSubject::kKey, id.data(), ref, nov, 41, 100, true, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(used, 60u);
    EXPECT_EQ(l->charge(QuotaSubject::kKey, id.data(), ref, nov, 40, 100, true, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kCharged);
    // A metered call may take the balance below zero.
    EXPECT_EQ(l->charge(QuotaSubject::kKey, id.data(), ref, nov, 7, 100, false, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(l->used(QuotaSubject::kKey, id.data(), nov), 107u);
    // The account of the same id is another subject.
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), nov), 0u);
    // December starts at zero, with no reset step.
    const uint16_t dec = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    EXPECT_EQ(QuotaLedger::used_in(ref, dec), 0u);
    EXPECT_EQ(l->charge(QuotaSubject::kKey, id.data(), ref, dec, 1, 100, true, kDecemberFirst, &used),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(used, 1u);
    QuotaLedger::refund(ref, dec, 1);
    EXPECT_EQ(l->used(QuotaSubject::kKey, id.data(), dec), 0u);
    // A refund of a period that ended takes nothing from the new one.
    l->charge(QuotaSubject::kKey, id.data(), ref, dec, 5, 100, true, kDecemberFirst, &used);
    QuotaLedger::refund(ref, nov, 5);
    EXPECT_EQ(l->used(QuotaSubject::kKey, id.data(), dec), 5u);
}

// What survives the process: another open (a restart, the new master of a
// binary upgrade) sees every unit, and keyauthd's read-only view too.
TEST(QuotaLedger, CountsSurviveReopenAndReadOnlyViewSeesThem) {
    TempDir dir;
    std::string err;
    const auto id = id_of(42);
    const uint16_t tag = quota_period_tag(KA_QUOTA_DAY, kDecemberFirst);
    {
        auto l = QuotaLedger::open(dir.sub("q"), true, err, 64);
        ASSERT_TRUE(l) << err;
        QuotaRef ref;
        ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), tag, kDecemberFirst, ref));
        uint64_t used;
        l->charge(QuotaSubject::kAccount, id.data(), ref, tag, 9, 10, true, kDecemberFirst, &used);
        ASSERT_TRUE(l->sync(err)) << err;
    }
    auto again = QuotaLedger::open(dir.sub("q"), true, err);  // its own size wins
    ASSERT_TRUE(again) << err;
    EXPECT_EQ(again->slots(), 64u);
    EXPECT_EQ(again->used(QuotaSubject::kAccount, id.data(), tag), 9u);
    auto ro = QuotaLedger::open(dir.sub("q"), false, err);
    ASSERT_TRUE(ro) << err;
    EXPECT_EQ(ro->used(QuotaSubject::kAccount, id.data(), tag), 9u);
    QuotaRef ref;
    EXPECT_FALSE(ro->find(QuotaSubject::kKey, id_of(43).data(), tag, kDecemberFirst, ref));
}

TEST(QuotaLedger, RefusesFilesItDoesNotRead) {
    TempDir dir;
    std::string err;
    {
        FILE *f = fopen(dir.sub("q").c_str(), "w");
        fputs("not a ledger at all, but long enough? no.", f);
        fclose(f);
    }
    EXPECT_FALSE(QuotaLedger::open(dir.sub("q"), true, err));
    EXPECT_NE(err.find("shorter than its header"), std::string::npos) << err;
    EXPECT_FALSE(QuotaLedger::open(dir.sub("missing/q"), true, err));
    EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

// Four processes charge one 1,000-unit quota with 3,000 calls: exactly 1,000
// are admitted, whatever the interleaving.
TEST(QuotaLedger, ProcessesNeverAdmitMoreThanTheQuota) {
    TempDir dir;
    std::string err;
    ASSERT_TRUE(QuotaLedger::open(dir.sub("q"), true, err, 256)) << err;
    const auto id = id_of(99);
    const uint16_t tag = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    std::vector<pid_t> kids;
    int pipes[4][2];
    for (int k = 0; k < 4; k++) {
        ASSERT_EQ(pipe(pipes[k]), 0);
        pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            std::string e;
            auto l = QuotaLedger::open(dir.sub("q"), true, e);
            uint32_t admitted = 0;
            for (int i = 0; l && i < 750; i++) {
                QuotaRef ref;
                uint64_t used;
                if (l->find(QuotaSubject::kAccount, id.data(), tag, kDecemberFirst, ref) &&
                    l->charge(QuotaSubject::kAccount, id.data(), ref, tag, 1, 1000, true,
                              kDecemberFirst, &used) == QuotaLedger::Charge::kCharged) {
                    admitted++;
                }
            }
            if (write(pipes[k][1], &admitted, sizeof admitted) != sizeof admitted) _exit(2);
            _exit(l ? 0 : 1);
        }
        kids.push_back(pid);
    }
    uint32_t total = 0;
    for (int k = 0; k < 4; k++) {
        int status = 0;
        ASSERT_EQ(waitpid(kids[k], &status, 0), kids[k]);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        uint32_t admitted = 0;
        ASSERT_EQ(read(pipes[k][0], &admitted, sizeof admitted), static_cast<ssize_t>(sizeof admitted));
        total += admitted;
        close(pipes[k][0]);
        close(pipes[k][1]);
    }
    EXPECT_EQ(total, 1000u);
    auto l = QuotaLedger::open(dir.sub("q"), false, err);
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), tag), 1000u);
}

// A slot whose period still has use is never taken from its subject: a
// newcomer whose window is full makes the ledger grow (a table appended,
// mapped by every process when it next looks) and is counted there; once
// the day is over the day quotas' slots serve others, and a total quota's
// stays.
TEST(QuotaLedger, AFullWindowGrowsTheLedgerAndSlotsAreReusedOnlyOnceTheirPeriodIsOver) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, QuotaLedger::kProbeLimit);
    ASSERT_TRUE(l) << err;
    auto other = QuotaLedger::open(dir.sub("q"), true, err);  // another worker, opened before
    ASSERT_TRUE(other) << err;
    const uint16_t day = quota_period_tag(KA_QUOTA_DAY, kLastMsOfNovember);
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, kLastMsOfNovember);
    uint64_t used;
    for (uint64_t n = 0; n < QuotaLedger::kProbeLimit; n++) {
        QuotaRef ref;
        const auto id = id_of(1000 + n);
        const bool credits = n % 2 == 0;
        ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), credits ? total : day, kLastMsOfNovember, ref)) << n;
        l->charge(QuotaSubject::kKey, id.data(), ref, credits ? total : day, 3, 10, true, kLastMsOfNovember,
                  &used);
    }
    EXPECT_EQ(l->slots_in_use(), QuotaLedger::kProbeLimit);
    EXPECT_EQ(l->slots(), QuotaLedger::kProbeLimit);
    QuotaRef ref;
    const auto newcomer = id_of(5);
    ASSERT_TRUE(l->find(QuotaSubject::kKey, newcomer.data(), day, kLastMsOfNovember, ref));
    EXPECT_EQ(l->slots(), 2 * QuotaLedger::kProbeLimit) << "a table as large as the ledger was appended";
    ASSERT_EQ(l->charge(QuotaSubject::kKey, newcomer.data(), ref, day, 4, 10, true, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(other->used(QuotaSubject::kKey, newcomer.data(), day), 4u) << "the other process maps the new table";
    EXPECT_EQ(other->slots(), 2 * QuotaLedger::kProbeLimit);
    EXPECT_EQ(l->no_room(), 0u);
    for (uint64_t n = 0; n < QuotaLedger::kProbeLimit; n++) {
        const uint16_t tag = n % 2 == 0 ? total : day;
        EXPECT_EQ(other->used(QuotaSubject::kKey, id_of(1000 + n).data(), tag), 3u) << n;
    }
    // The next day the day quotas' slots in the first table are free again
    // (a newcomer of the first table takes one of them); the credits stay.
    const uint16_t dec1 = quota_period_tag(KA_QUOTA_DAY, kDecemberFirst);
    const auto late = id_of(6);
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, late.data(), dec1, kDecemberFirst, ref));
    EXPECT_EQ(l->slots(), 2 * QuotaLedger::kProbeLimit) << "no growth: a slot whose day is over served";
    for (uint64_t n = 0; n < QuotaLedger::kProbeLimit; n += 2) {
        EXPECT_EQ(l->used(QuotaSubject::kKey, id_of(1000 + n).data(), total), 3u) << n;
    }
}

TEST(QuotaCost, ReportedCostsParseStrictly) {
    EXPECT_EQ(ka_quota_parse_cost("7", 1), 7);
    EXPECT_EQ(ka_quota_parse_cost("0", 1), 0);
    EXPECT_EQ(ka_quota_parse_cost("1000000000", 10), 1000000000);
    EXPECT_EQ(ka_quota_parse_cost("1000000001", 10), -1);
    EXPECT_EQ(ka_quota_parse_cost("99999999999999999999", 20), -1);
    EXPECT_EQ(ka_quota_parse_cost("-3", 2), -1);
    EXPECT_EQ(ka_quota_parse_cost("3 ", 2), -1);
    EXPECT_EQ(ka_quota_parse_cost("", 0), -1);
    EXPECT_EQ(ka_quota_parse_cost("1e3", 3), -1);
}

// Many edges: keyauth-syncd reads each subject's own use to publish and
// sets what the other edges used; the edge admits against the sum.
TEST(QuotaLedger, OtherEdgesUseCountsAtThisEdge) {
    TempDir dir;
    std::string err;
    auto edge = QuotaLedger::open(dir.sub("q"), true, err, 256);
    ASSERT_TRUE(edge) << err;
    auto syncd = QuotaLedger::open_existing(dir.sub("q"), err);
    ASSERT_TRUE(syncd) << err;
    EXPECT_FALSE(QuotaLedger::open_existing(dir.sub("none"), err));
    const auto id = id_of(3);
    const uint16_t tag = quota_period_tag(KA_QUOTA_DAY, kDecemberFirst);
    QuotaRef ref;
    uint64_t used;
    ASSERT_TRUE(edge->find(QuotaSubject::kAccount, id.data(), tag, kDecemberFirst, ref));
    edge->charge(QuotaSubject::kAccount, id.data(), ref, tag, 4, 10, true, kDecemberFirst, &used);
    std::vector<QuotaLedger::Entry> seen;
    syncd->for_each([&](const QuotaLedger::Entry &e) { seen.push_back(e); });
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].subject, QuotaSubject::kAccount);
    EXPECT_EQ(std::memcmp(seen[0].id, id.data(), KA_ID_LEN), 0);
    EXPECT_EQ(seen[0].tag, tag);
    EXPECT_EQ(seen[0].used, 4u);
    ASSERT_TRUE(syncd->set_others(QuotaSubject::kAccount, id.data(), tag, 5, kDecemberFirst));
    EXPECT_EQ(QuotaLedger::used_in(ref, tag), 9u);
    EXPECT_EQ(edge->charge(QuotaSubject::kAccount, id.data(), ref, tag, 2, 10, true, kDecemberFirst, &used),
              QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(edge->charge(QuotaSubject::kAccount, id.data(), ref, tag, 1, 10, true, kDecemberFirst, &used),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(used, 10u);
    // Another period's news counts for nothing here (the day before is
    // another slot's), and leaves this period's as it was.
    syncd->set_others(QuotaSubject::kAccount, id.data(), tag - 1, 100, kDecemberFirst);
    EXPECT_EQ(QuotaLedger::used_in(ref, tag), 10u);
    EXPECT_EQ(edge->used(QuotaSubject::kAccount, id.data(), tag - 1), 100u);
}

namespace {

// The ledger file's slots, mapped by the test to stage what a crash or
// another process leaves behind (offsets: SCHEMA.md, the quota ledger).
struct RawLedger {
    std::vector<unsigned char> bytes;
    explicit RawLedger(const std::string &path) {
        FILE *f = fopen(path.c_str(), "rb");
        if (!f) return;
        fseek(f, 0, SEEK_END);
        bytes.resize(static_cast<size_t>(ftell(f)));
        fseek(f, 0, SEEK_SET);
        if (fread(bytes.data(), 1, bytes.size(), f) != bytes.size()) bytes.clear();
        fclose(f);
    }
    // The slot holding id, or -1.
    int slot_of(const unsigned char *id, uint64_t slots) const {
        for (uint64_t i = 0; i < slots; i++) {
            const unsigned char *s = bytes.data() + 4096 + i * 64;
            if (std::memcmp(s + 8, id, KA_ID_LEN) == 0) return static_cast<int>(i);
        }
        return -1;
    }
};

void poke_u32(const std::string &path, size_t offset, uint32_t v) {
    FILE *f = fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    fseek(f, static_cast<long>(offset), SEEK_SET);
    fwrite(&v, sizeof v, 1, f);
    fclose(f);
}

}  // namespace

// Found in review: a subject whose probe met a slot being written (here: left
// odd by a writer that died) was given a fresh slot before its own, its
// count lost. It must find its own slot, past the odd one, and keep its count.
TEST(QuotaLedger, ASubjectPastASlotBeingWrittenKeepsItsCount) {
    TempDir dir;
    std::string err;
    const uint64_t slots = 4;
    const uint16_t tag = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    // Where a subject goes in an empty ledger: its home slot.
    auto home_of = [&](QuotaSubject subject, const unsigned char *id) {
        const std::string path = dir.sub("home");
        std::remove(path.c_str());
        auto l = QuotaLedger::open(path, true, err, slots);
        QuotaRef r;
        l->find(subject, id, tag, kDecemberFirst, r);
        return RawLedger(path).slot_of(id, slots);
    };
    const auto a = id_of(600);
    const int home_a = home_of(QuotaSubject::kAccount, a.data());
    ASSERT_GE(home_a, 0);
    // b: a key whose home is a's, so that a, coming second, sits one further
    std::array<unsigned char, KA_ID_LEN> b{};
    for (uint64_t n = 1; n < 1000; n++) {
        b = id_of(5000 + n);
        if (home_of(QuotaSubject::kKey, b.data()) == home_a) break;
    }
    ASSERT_EQ(home_of(QuotaSubject::kKey, b.data()), home_a);

    const std::string path = dir.sub("q");
    auto l = QuotaLedger::open(path, true, err, slots);
    ASSERT_TRUE(l) << err;
    QuotaRef rb, ra;
    uint64_t used;
    ASSERT_TRUE(l->find(QuotaSubject::kKey, b.data(), tag, kDecemberFirst, rb));
    // b has use this month, so its slot is not free for a
    l->charge(QuotaSubject::kKey, b.data(), rb, tag, 1, 10, true, kDecemberFirst, &used);
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, a.data(), tag, kDecemberFirst, ra));
    ASSERT_EQ(RawLedger(path).slot_of(a.data(), slots), (home_a + 1) % static_cast<int>(slots));
    ASSERT_EQ(l->charge(QuotaSubject::kAccount, a.data(), ra, tag, 100, 100, true, kDecemberFirst, &used),
              QuotaLedger::Charge::kCharged);
    poke_u32(path, 4096 + static_cast<size_t>(home_a) * 64, 7);  // b's writer died mid-write

    auto other = QuotaLedger::open(path, true, err);  // another worker
    QuotaRef again;
    ASSERT_TRUE(other->find(QuotaSubject::kAccount, a.data(), tag, kDecemberFirst, again));
    EXPECT_EQ(QuotaLedger::used_in(again, tag), 100u) << "a's count after its probe met an odd slot";
    EXPECT_EQ(other->charge(QuotaSubject::kAccount, a.data(), again, tag, 1, 100, true, kDecemberFirst,
                            &used),
              QuotaLedger::Charge::kNoRoom)
        << "the quota must not have been refilled";
    // and the dead writer's slot serves the next subject that needs one
    QuotaRef c;
    EXPECT_TRUE(other->find(QuotaSubject::kKey, b.data(), tag, kDecemberFirst, c));
}

// Found in review: a charge carrying an earlier period's tag (a metered call
// settling after its period, a worker whose clock lags) set the word back
// to that period, wiping the new period's count. Now each period of a class
// before the next has a slot of its own (#44: a clock a period behind
// charges its own period, and a clock a period ahead never charges ours);
// one two periods behind, whose slot holds the later period, is charged in
// that period, never set back.
TEST(QuotaLedger, AChargeOfAnEarlierPeriodNeverWipesTheLaterOne) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, 64);
    ASSERT_TRUE(l) << err;
    const auto id = id_of(77);
    const int64_t kOctoberLast = 1793491199999;  // 2026-10-31T23:59:59.999Z
    const uint16_t oct = quota_period_tag(KA_QUOTA_MONTH, kOctoberLast);
    const uint16_t nov = quota_period_tag(KA_QUOTA_MONTH, kLastMsOfNovember);
    const uint16_t dec = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    QuotaRef ref;
    uint64_t used;
    uint16_t charged = 0;
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), dec, kDecemberFirst, ref));
    l->charge(QuotaSubject::kAccount, id.data(), ref, dec, 90, 100, true, kDecemberFirst, &used);
    // a lagging clock still in November charges November, not December
    QuotaRef lag;
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), nov, kLastMsOfNovember, lag));
    EXPECT_EQ(QuotaLedger::used_in(lag, nov), 0u);
    EXPECT_EQ(l->charge(QuotaSubject::kAccount, id.data(), lag, nov, 11, 100, true, kLastMsOfNovember, &used,
                        &charged),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(charged, nov);
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), dec), 90u);
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), nov), 11u);
    // October shares December's slot: charged in December, never set back
    QuotaRef older;
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), oct, kOctoberLast, older));
    EXPECT_EQ(QuotaLedger::used_in(older, oct), 90u);
    EXPECT_EQ(l->charge(QuotaSubject::kAccount, id.data(), older, oct, 7, 100, false, kOctoberLast, &used,
                        &charged),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(charged, dec) << "charged in the later period it found";
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), dec), 97u);
    // and a process whose clock lags never takes the slot as over
    auto behind = QuotaLedger::open(dir.sub("q"), true, err);
    for (uint64_t n = 0; n < 80; n++) {
        QuotaRef r;
        behind->find(QuotaSubject::kKey, id_of(9000 + n).data(), nov, kLastMsOfNovember, r);
    }
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), dec), 97u);
}

// #44: switching a quota's period kind refilled it (a key of 2 credits used
// up, PATCHed to a day quota, one call, then back to credits: used 0, two
// more calls passed; an account's month likewise). Each kind keeps its own.
TEST(QuotaLedger, APeriodKindChangedAndBackFindsItsUse) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, 1024);
    ASSERT_TRUE(l) << err;
    const auto key = id_of(11);
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, kDecemberFirst);
    const uint16_t day = quota_period_tag(KA_QUOTA_DAY, kDecemberFirst);
    const uint16_t month = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    uint64_t used;
    auto charge = [&](QuotaSubject s, const unsigned char *id, uint16_t tag, uint64_t units) {
        QuotaRef ref;
        if (!l->find(s, id, tag, kDecemberFirst, ref)) return QuotaLedger::Charge::kNoRoom;
        return l->charge(s, id, ref, tag, 1, units, true, kDecemberFirst, &used);
    };
    EXPECT_EQ(charge(QuotaSubject::kKey, key.data(), total, 2), QuotaLedger::Charge::kCharged);
    EXPECT_EQ(charge(QuotaSubject::kKey, key.data(), total, 2), QuotaLedger::Charge::kCharged);
    EXPECT_EQ(charge(QuotaSubject::kKey, key.data(), total, 2), QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(charge(QuotaSubject::kKey, key.data(), day, 5), QuotaLedger::Charge::kCharged);
    EXPECT_EQ(l->used(QuotaSubject::kKey, key.data(), total), 2u) << "the credits' use, after a day quota";
    EXPECT_EQ(charge(QuotaSubject::kKey, key.data(), total, 2), QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(l->used(QuotaSubject::kKey, key.data(), day), 1u);

    const auto acc = id_of(12);
    for (int i = 0; i < 63; i++) charge(QuotaSubject::kAccount, acc.data(), month, 100);
    EXPECT_EQ(charge(QuotaSubject::kAccount, acc.data(), day, 5), QuotaLedger::Charge::kCharged);
    EXPECT_EQ(l->used(QuotaSubject::kAccount, acc.data(), month), 63u) << "the month's use, after a day quota";
}

// #44: two nginx on one ledger, one with its clock a day ahead: its calls
// were charged to "tomorrow", and the other's "today" then counted them
// (today lost units) and charged into tomorrow (which started full). Each
// now charges the period its clock says, in a slot of that period.
TEST(QuotaLedger, AClockAPeriodAheadNeverChargesThisPeriod) {
    TempDir dir;
    std::string err;
    auto here = QuotaLedger::open(dir.sub("q"), true, err, 1024);
    ASSERT_TRUE(here) << err;
    auto ahead = QuotaLedger::open(dir.sub("q"), true, err);
    ASSERT_TRUE(ahead) << err;
    const auto id = id_of(21);
    const int64_t now = kDecemberFirst + 3600000;
    const int64_t tomorrow = now + 86400000;
    const uint16_t today_tag = quota_period_tag(KA_QUOTA_DAY, now);
    const uint16_t tomorrow_tag = quota_period_tag(KA_QUOTA_DAY, tomorrow);
    uint64_t used;
    QuotaRef a, h;
    ASSERT_TRUE(ahead->find(QuotaSubject::kAccount, id.data(), tomorrow_tag, tomorrow, a));
    for (int i = 0; i < 7; i++) {
        ahead->charge(QuotaSubject::kAccount, id.data(), a, tomorrow_tag, 1, 10, true, tomorrow, &used);
    }
    ASSERT_TRUE(here->find(QuotaSubject::kAccount, id.data(), today_tag, now, h));
    EXPECT_EQ(QuotaLedger::used_in(h, today_tag), 0u) << "today counts none of the clock ahead's calls";
    for (int i = 0; i < 10; i++) {
        ASSERT_EQ(here->charge(QuotaSubject::kAccount, id.data(), h, today_tag, 1, 10, true, now, &used),
                  QuotaLedger::Charge::kCharged)
            << i;
    }
    EXPECT_EQ(here->charge(QuotaSubject::kAccount, id.data(), h, today_tag, 1, 10, true, now, &used),
              QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(here->used(QuotaSubject::kAccount, id.data(), today_tag), 10u);
    EXPECT_EQ(here->used(QuotaSubject::kAccount, id.data(), tomorrow_tag), 7u)
        << "tomorrow holds only the calls the clock ahead charged there";
}

// #44: one-time keys' credits held their slots for ever, so the ledger
// filled and refused paying accounts with 503. The sweep releases the
// credits of keys that are gone for good, and their slots serve others.
TEST(QuotaLedger, TheSweepReleasesCreditsOfDeadKeysOnly) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, 256);
    ASSERT_TRUE(l) << err;
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, kDecemberFirst);
    const uint16_t month = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    uint64_t used;
    for (uint64_t n = 0; n < 100; n++) {
        QuotaRef ref;
        const auto id = id_of(3000 + n);
        ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), total, kDecemberFirst, ref));
        l->charge(QuotaSubject::kKey, id.data(), ref, total, 1, 1, true, kDecemberFirst, &used);
    }
    QuotaRef acc;
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, id_of(1).data(), month, kDecemberFirst, acc));
    l->charge(QuotaSubject::kAccount, id_of(1).data(), acc, month, 5, 10, true, kDecemberFirst, &used);
    // the keys with an odd number are revoked
    auto dead = [](const unsigned char *id) { return id[KA_ID_LEN - 1] % 2 == 1; };
    uint64_t live = 0, released = 0, at = 0;
    while (at < l->slots()) at = l->sweep_part(at, 50, kDecemberFirst, &live, &released, dead);
    EXPECT_EQ(released, 50u);
    EXPECT_EQ(live, 51u) << "50 live credits and the account's month";
    for (uint64_t n = 0; n < 100; n++) {
        EXPECT_EQ(l->used(QuotaSubject::kKey, id_of(3000 + n).data(), total), n % 2 == 0 ? 1u : 0u) << n;
    }
    // a second sweep finds nothing more to release
    live = released = at = 0;
    while (at < l->slots()) at = l->sweep_part(at, 1000, kDecemberFirst, &live, &released, dead);
    EXPECT_EQ(released, 0u);
    EXPECT_EQ(live, 51u);
    // 200 newcomers fit the 256 slots without growing: the released ones serve
    for (uint64_t n = 0; n < 200; n++) {
        QuotaRef ref;
        const auto id = id_of(9000 + n);
        ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), month, kDecemberFirst, ref)) << n;
        l->charge(QuotaSubject::kAccount, id.data(), ref, month, 1, 10, true, kDecemberFirst, &used);
    }
    EXPECT_EQ(l->slots(), 256u);
    for (uint64_t n = 0; n < 100; n += 2) {
        EXPECT_EQ(l->used(QuotaSubject::kKey, id_of(3000 + n).data(), total), 1u) << n;
    }
}

// A ledger made smaller (an earlier default, a smaller keyauth_quota_size)
// grows to the size a writer asks for, keeping every count.
TEST(QuotaLedger, AWritableOpenGrowsToTheSizeAskedAndKeepsItsCounts) {
    TempDir dir;
    std::string err;
    const auto id = id_of(31);
    const uint16_t tag = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    {
        auto l = QuotaLedger::open(dir.sub("q"), true, err, 100);
        ASSERT_TRUE(l) << err;
        QuotaRef ref;
        uint64_t used;
        ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), tag, kDecemberFirst, ref));
        l->charge(QuotaSubject::kKey, id.data(), ref, tag, 8, 10, true, kDecemberFirst, &used);
    }
    auto big = QuotaLedger::open(dir.sub("q"), true, err, 5000);
    ASSERT_TRUE(big) << err;
    EXPECT_EQ(big->slots(), 5000u);
    EXPECT_EQ(big->used(QuotaSubject::kKey, id.data(), tag), 8u);
    auto again = QuotaLedger::open(dir.sub("q"), true, err, 1000);  // a smaller ask shrinks nothing
    ASSERT_TRUE(again) << err;
    EXPECT_EQ(again->slots(), 5000u);
    auto ro = QuotaLedger::open(dir.sub("q"), false, err);
    ASSERT_TRUE(ro) << err;
    EXPECT_EQ(ro->slots(), 5000u);
    std::string why;
    EXPECT_FALSE(ro->grow(10000, why));
}

// A slot an earlier build made names its subject alone (1 key, 2 account):
// this build finds it for the class of the period it holds, and only that.
TEST(QuotaLedger, ASlotOfAnEarlierBuildServesTheClassItHolds) {
    TempDir dir;
    std::string err;
    const std::string path = dir.sub("q");
    auto l = QuotaLedger::open(path, true, err, 64);
    ASSERT_TRUE(l) << err;
    const auto id = id_of(41);
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, kDecemberFirst);
    const uint16_t day = quota_period_tag(KA_QUOTA_DAY, kDecemberFirst);
    QuotaRef ref;
    uint64_t used;
    ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), total, kDecemberFirst, ref));
    l->charge(QuotaSubject::kKey, id.data(), ref, total, 3, 10, true, kDecemberFirst, &used);
    const int slot = RawLedger(path).slot_of(id.data(), 64);
    ASSERT_GE(slot, 0);
    unsigned char legacy = static_cast<unsigned char>(QuotaSubject::kKey);
    {
        FILE *f = fopen(path.c_str(), "r+b");
        ASSERT_NE(f, nullptr);
        fseek(f, 4096 + slot * 64 + 4, SEEK_SET);
        fwrite(&legacy, 1, 1, f);
        fclose(f);
    }
    auto other = QuotaLedger::open(path, true, err);
    EXPECT_EQ(other->used(QuotaSubject::kKey, id.data(), total), 3u);
    EXPECT_EQ(other->used(QuotaSubject::kKey, id.data(), day), 0u);
    QuotaRef d;
    ASSERT_TRUE(other->find(QuotaSubject::kKey, id.data(), day, kDecemberFirst, d));
    other->charge(QuotaSubject::kKey, id.data(), d, day, 1, 10, true, kDecemberFirst, &used);
    EXPECT_EQ(other->used(QuotaSubject::kKey, id.data(), total), 3u);
    EXPECT_EQ(other->used(QuotaSubject::kKey, id.data(), day), 1u);
    std::vector<QuotaLedger::Entry> seen;
    other->for_each([&](const QuotaLedger::Entry &e) { seen.push_back(e); });
    ASSERT_EQ(seen.size(), 2u);
}
