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
    ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), kLastMsOfNovember, ref));
    const uint16_t nov = quota_period_tag(KA_QUOTA_MONTH, kLastMsOfNovember);
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
        ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), kDecemberFirst, ref));
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
    EXPECT_FALSE(ro->find(QuotaSubject::kKey, id_of(43).data(), kDecemberFirst, ref));
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
                if (l->find(QuotaSubject::kAccount, id.data(), kDecemberFirst, ref) &&
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

// A full window refuses a new subject (the edge fails closed) rather than
// take a slot whose period still has use; once that period is over, the
// slot serves another subject, and a total quota's never does.
TEST(QuotaLedger, SlotsAreReusedOnlyOnceTheirPeriodIsOver) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, QuotaLedger::kProbeLimit);
    ASSERT_TRUE(l) << err;
    const uint16_t day = quota_period_tag(KA_QUOTA_DAY, kLastMsOfNovember);
    const uint16_t total = quota_period_tag(KA_QUOTA_TOTAL, kLastMsOfNovember);
    uint64_t used;
    for (uint64_t n = 0; n < QuotaLedger::kProbeLimit; n++) {
        QuotaRef ref;
        const auto id = id_of(1000 + n);
        ASSERT_TRUE(l->find(QuotaSubject::kKey, id.data(), kLastMsOfNovember, ref)) << n;
        const bool credits = n % 2 == 0;
        l->charge(QuotaSubject::kKey, id.data(), ref, credits ? total : day, 3, 10, true,
                  kLastMsOfNovember, &used);
    }
    EXPECT_EQ(l->slots_in_use(), QuotaLedger::kProbeLimit);
    QuotaRef ref;
    const auto newcomer = id_of(5);
    EXPECT_FALSE(l->find(QuotaSubject::kKey, newcomer.data(), kLastMsOfNovember, ref));
    // The next day the day quotas' slots are free again; the credits stay.
    ASSERT_TRUE(l->find(QuotaSubject::kKey, newcomer.data(), kDecemberFirst, ref));
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
    ASSERT_TRUE(edge->find(QuotaSubject::kAccount, id.data(), kDecemberFirst, ref));
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
    // Another period's news counts for nothing.
    syncd->set_others(QuotaSubject::kAccount, id.data(), tag - 1, 100, kDecemberFirst);
    EXPECT_EQ(QuotaLedger::used_in(ref, tag), 5u);
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
        l->find(subject, id, kDecemberFirst, r);
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
    ASSERT_TRUE(l->find(QuotaSubject::kKey, b.data(), kDecemberFirst, rb));
    // b has use this month, so its slot is not free for a
    l->charge(QuotaSubject::kKey, b.data(), rb, tag, 1, 10, true, kDecemberFirst, &used);
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, a.data(), kDecemberFirst, ra));
    ASSERT_EQ(RawLedger(path).slot_of(a.data(), slots), (home_a + 1) % static_cast<int>(slots));
    ASSERT_EQ(l->charge(QuotaSubject::kAccount, a.data(), ra, tag, 100, 100, true, kDecemberFirst, &used),
              QuotaLedger::Charge::kCharged);
    poke_u32(path, 4096 + static_cast<size_t>(home_a) * 64, 7);  // b's writer died mid-write

    auto other = QuotaLedger::open(path, true, err);  // another worker
    QuotaRef again;
    ASSERT_TRUE(other->find(QuotaSubject::kAccount, a.data(), kDecemberFirst, again));
    EXPECT_EQ(QuotaLedger::used_in(again, tag), 100u) << "a's count after its probe met an odd slot";
    EXPECT_EQ(other->charge(QuotaSubject::kAccount, a.data(), again, tag, 1, 100, true, kDecemberFirst,
                            &used),
              QuotaLedger::Charge::kNoRoom)
        << "the quota must not have been refilled";
    // and the dead writer's slot serves the next subject that needs one
    QuotaRef c;
    EXPECT_TRUE(other->find(QuotaSubject::kKey, b.data(), kDecemberFirst, c));
}

// Found in review: a charge carrying an earlier period's tag (a metered call
// settling after its period, a worker whose clock lags) set the word back
// to that period, wiping the new period's count.
TEST(QuotaLedger, AChargeOfAnEarlierPeriodNeverWipesTheLaterOne) {
    TempDir dir;
    std::string err;
    auto l = QuotaLedger::open(dir.sub("q"), true, err, 64);
    ASSERT_TRUE(l) << err;
    const auto id = id_of(77);
    const uint16_t nov = quota_period_tag(KA_QUOTA_MONTH, kLastMsOfNovember);
    const uint16_t dec = quota_period_tag(KA_QUOTA_MONTH, kDecemberFirst);
    QuotaRef ref;
    uint64_t used;
    uint16_t charged = 0;
    ASSERT_TRUE(l->find(QuotaSubject::kAccount, id.data(), kDecemberFirst, ref));
    l->charge(QuotaSubject::kAccount, id.data(), ref, dec, 90, 100, true, kDecemberFirst, &used);
    // a lagging clock still sees November's tag: December's 90 count for it
    EXPECT_EQ(QuotaLedger::used_in(ref, nov), 90u);
    EXPECT_EQ(l->charge(QuotaSubject::kAccount, id.data(), ref, nov, 11, 100, true, kLastMsOfNovember, &used),
              QuotaLedger::Charge::kNoRoom);
    EXPECT_EQ(l->charge(QuotaSubject::kAccount, id.data(), ref, nov, 7, 100, false, kLastMsOfNovember, &used,
                        &charged),
              QuotaLedger::Charge::kCharged);
    EXPECT_EQ(charged, dec) << "charged in the later period it found";
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), dec), 97u);
    // and a process whose clock lags never takes the slot as over
    auto behind = QuotaLedger::open(dir.sub("q"), true, err);
    for (uint64_t n = 0; n < 80; n++) {
        QuotaRef r;
        behind->find(QuotaSubject::kKey, id_of(9000 + n).data(), kLastMsOfNovember, r);
    }
    EXPECT_EQ(l->used(QuotaSubject::kAccount, id.data(), dec), 97u);
}
