#include "money.h"

#include <gtest/gtest.h>

#include <string>

using namespace keyauth;

namespace {

std::string rate_text(uint64_t micro) {
    char buf[kRateTextMax];
    size_t n = format_rate(micro, buf);
    EXPECT_LT(n, kRateTextMax);
    EXPECT_EQ(buf[n], '\0');
    return std::string(buf, n);
}

std::string paise_text(uint64_t paise) {
    char buf[kMoneyTextMax];
    size_t n = format_paise(paise, buf);
    EXPECT_LT(n, kMoneyTextMax);
    EXPECT_EQ(buf[n], '\0');
    return std::string(buf, n);
}

std::string cents_text(uint64_t cents) {
    char buf[kMoneyTextMax];
    size_t n = format_cents(cents, buf);
    EXPECT_LT(n, kMoneyTextMax);
    EXPECT_EQ(buf[n], '\0');
    return std::string(buf, n);
}

// USD text straight from the catalog's text forms.
std::string usd_of(std::string_view inr, std::string_view rate) {
    uint64_t paise = 0, micro = 0;
    EXPECT_TRUE(parse_inr(inr, paise)) << inr;
    EXPECT_TRUE(parse_rate(rate, micro)) << rate;
    return cents_text(usd_cents(paise, micro));
}

// Independent reference: schoolbook long division of the decimal string
// paise * 10^6 ("<paise>000000") by micro, then half-up on the remainder and
// a decimal-string increment. Shares no arithmetic with usd_cents. micro must
// be <= 10^12 so rem * 10 + 9 stays in 64 bits.
std::string reference_cents(uint64_t paise, uint64_t micro) {
    std::string num = std::to_string(paise) + "000000";
    std::string q;
    uint64_t rem = 0;
    for (char c : num) {
        rem = rem * 10 + static_cast<uint64_t>(c - '0');
        q.push_back(static_cast<char>('0' + rem / micro));
        rem %= micro;
    }
    size_t nz = q.find_first_not_of('0');
    q = nz == std::string::npos ? "0" : q.substr(nz);
    if (rem * 2 >= micro) {
        size_t i = q.size();
        while (i > 0 && q[i - 1] == '9') q[--i] = '0';
        if (i == 0) q.insert(q.begin(), '1');
        else q[i - 1]++;
    }
    return q;
}

// splitmix64: deterministic so failures reproduce.
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    // Uniform-ish in [1, max], but with a random number of digits so small
    // and large magnitudes are both well represented.
    uint64_t pick(uint64_t max) {
        uint64_t limit = 1;
        for (uint64_t d = next() % 14; d > 0 && limit <= max / 10; d--) limit *= 10;
        if (limit > max) limit = max;
        return next() % limit + 1;
    }
};

}  // namespace

TEST(Money, ParseRateAccepts) {
    struct Case {
        const char *text;
        uint64_t micro;
    } cases[] = {
        {"83.123456", 83'123'456},
        {"83.5", 83'500'000},
        {"84", 84'000'000},
        {"83.500000", 83'500'000},
        {"0.5", 500'000},
        {"0.000001", 1},
        {"1", 1'000'000},
        {"10", 10'000'000},
        {"1000000", 1'000'000'000'000},
        {"1000000.000000", 1'000'000'000'000},
        {"999999.999999", 999'999'999'999},
    };
    for (const Case &c : cases) {
        uint64_t micro = 0;
        EXPECT_TRUE(parse_rate(c.text, micro)) << c.text;
        EXPECT_EQ(micro, c.micro) << c.text;
    }
}

TEST(Money, ParseRateRejects) {
    const std::string kilo_digits(1024, '7');
    const std::string kilo_fraction = "1." + std::string(1022, '0');
    const std::string with_nul("83\0", 3);
    const std::string rejected[] = {
        "", "0", "0.0", "0.000000", "-1", "+1", "1e3", "1E3", " 83", "83 ", "\t83",
        "83\n", ".5", "5.", ".", "83.1234567", "0.0000001", "01", "00.5", "007",
        "1,000", "83,5", "NaN", "nan", "inf", "Infinity", "0x10", "83..1", "8 3",
        "83.12 ", "1000000.000001", "1000001", "10000000", "99999999999999999999",
        "18446744073709551616", kilo_digits, kilo_fraction, with_nul, "\xd9\xa1",
    };
    for (const std::string &text : rejected) {
        uint64_t micro = 42;
        EXPECT_FALSE(parse_rate(text, micro)) << '"' << text << '"';
        EXPECT_EQ(micro, 42u) << "output touched on failure: " << text;
    }
}

TEST(Money, ParseInrAccepts) {
    struct Case {
        const char *text;
        uint64_t paise;
    } cases[] = {
        {"4999", 499'900},
        {"4999.5", 499'950},
        {"4999.50", 499'950},
        {"4999.05", 499'905},
        {"0.01", 1},
        {"0.1", 10},
        {"1", 100},
        {"10000000000", 1'000'000'000'000},
        {"10000000000.00", 1'000'000'000'000},
        {"9999999999.99", 999'999'999'999},
    };
    for (const Case &c : cases) {
        uint64_t paise = 0;
        EXPECT_TRUE(parse_inr(c.text, paise)) << c.text;
        EXPECT_EQ(paise, c.paise) << c.text;
    }
}

TEST(Money, ParseInrRejects) {
    const std::string kilo_digits(1024, '9');
    const std::string with_nul("4999\0", 5);
    const std::string rejected[] = {
        "", "0", "0.0", "0.00", "-1", "+1", "1e3", " 83", "83 ", ".5", "5.", ".",
        "4999.505", "0.001", "83.1234567", "01", "00.01", "1,000", "NaN", "inf",
        "10000000000.01", "10000000001", "100000000000", "18446744073709551616",
        "4999.5.0", "4999,50", "₹4999", kilo_digits, with_nul,
    };
    for (const std::string &text : rejected) {
        uint64_t paise = 42;
        EXPECT_FALSE(parse_inr(text, paise)) << '"' << text << '"';
        EXPECT_EQ(paise, 42u) << "output touched on failure: " << text;
    }
}

TEST(Money, FormatRateIsCanonical) {
    EXPECT_EQ(rate_text(83'123'456), "83.123456");
    EXPECT_EQ(rate_text(83'500'000), "83.5");
    EXPECT_EQ(rate_text(84'000'000), "84");
    EXPECT_EQ(rate_text(83'000'010), "83.00001");
    EXPECT_EQ(rate_text(1), "0.000001");
    EXPECT_EQ(rate_text(500'000), "0.5");
    EXPECT_EQ(rate_text(1'000'000'000'000), "1000000");
    EXPECT_EQ(rate_text(0), "0");
    EXPECT_EQ(rate_text(UINT64_MAX), "18446744073709.551615");

    // Non-canonical input comes back canonical.
    uint64_t micro = 0;
    ASSERT_TRUE(parse_rate("83.500000", micro));
    EXPECT_EQ(rate_text(micro), "83.5");
    ASSERT_TRUE(parse_rate("84.0", micro));
    EXPECT_EQ(rate_text(micro), "84");
}

TEST(Money, FormatPaiseAndCents) {
    EXPECT_EQ(paise_text(499'900), "4999.00");
    EXPECT_EQ(paise_text(499'950), "4999.50");
    EXPECT_EQ(paise_text(1), "0.01");
    EXPECT_EQ(paise_text(10), "0.10");
    EXPECT_EQ(paise_text(0), "0.00");
    EXPECT_EQ(paise_text(1'000'000'000'000), "10000000000.00");
    EXPECT_EQ(cents_text(1205), "12.05");
    EXPECT_EQ(cents_text(99), "0.99");
    EXPECT_EQ(cents_text(100), "1.00");
    EXPECT_EQ(cents_text(UINT64_MAX), "184467440737095516.15");
}

TEST(Money, RoundTrips) {
    Rng rng{1};
    for (int i = 0; i < 3000; i++) {
        uint64_t micro = rng.pick(kMaxRateMicro);
        std::string text = rate_text(micro);
        uint64_t back = 0;
        ASSERT_TRUE(parse_rate(text, back)) << text;
        EXPECT_EQ(back, micro) << text;
        EXPECT_EQ(rate_text(back), text);

        uint64_t paise = rng.pick(kMaxPaise);
        std::string ptext = paise_text(paise);
        ASSERT_TRUE(parse_inr(ptext, back)) << ptext;
        EXPECT_EQ(back, paise) << ptext;
        // format_cents renders cents exactly as format_paise renders paise.
        EXPECT_EQ(cents_text(paise), ptext);
    }
}

TEST(Money, HalfUpBoundaries) {
    // 1 paisa at 2 INR/USD is exactly half a cent: up.
    EXPECT_EQ(usd_cents(1, 2'000'000), 1u);
    EXPECT_EQ(cents_text(usd_cents(1, 2'000'000)), "0.01");
    // A hair below half (rate a millionth higher): down; a hair above: up.
    EXPECT_EQ(usd_cents(1, 2'000'001), 0u);
    EXPECT_EQ(usd_cents(1, 1'999'999), 1u);
    EXPECT_EQ(usd_cents(1, 3'000'000), 0u);  // a third of a cent
    // 1.5 and 2.5 cents both go up (half-up, not banker's rounding).
    EXPECT_EQ(usd_cents(3, 2'000'000), 2u);
    EXPECT_EQ(usd_cents(5, 2'000'000), 3u);
    // Exact: 0.83 INR at 83 INR/USD is one cent.
    EXPECT_EQ(usd_cents(83, 83'000'000), 1u);
    EXPECT_EQ(usd_cents(83, 83'000'001), 1u);  // 0.99999... rounds up to 1
    EXPECT_EQ(usd_cents(82, 83'000'000), 1u);  // 0.9879...

    // A realistic rate: 83.123456 = 2^8 * 324701 / 10^6, so 6494.02 INR
    // (649402 paise) is exactly 7812.5 cents.
    EXPECT_EQ(usd_cents(649'402, 83'123'456), 7813u);
    EXPECT_EQ(usd_of("6494.02", "83.123456"), "78.13");
    EXPECT_EQ(usd_of("6494.02", "83.123457"), "78.12");  // just below the half
    EXPECT_EQ(usd_of("6494.01", "83.123456"), "78.12");

    // At the top rate, 5000 paise * 10^6 / 10^12 = 0.5 cent exactly.
    EXPECT_EQ(usd_cents(500'000, kMaxRateMicro), 1u);
    EXPECT_EQ(usd_cents(499'999, kMaxRateMicro), 0u);
    EXPECT_EQ(usd_cents(1, kMaxRateMicro), 0u);

    // Generated exact halves: with micro = 2 * paise * 10^6 / 5^a the
    // quotient is exactly 5^a / 2; nudging micro by one moves it off the half.
    Rng rng{7};
    int checked = 0;
    for (int i = 0; i < 2000; i++) {
        uint64_t pow5 = 1;
        for (uint64_t a = rng.next() % 7; a > 0; a--) pow5 *= 5;
        uint64_t paise = rng.next() % (500'000 * pow5) + 1;
        // pow5 divides 2 * 10^6, so micro is whole; it must exceed pow5 + 1
        // for a one-millionth nudge to stay within half a cent.
        uint64_t micro = paise * 2'000'000 / pow5;
        if (micro <= pow5 + 1 || micro > kMaxRateMicro) continue;
        EXPECT_EQ(usd_cents(paise, micro), (pow5 + 1) / 2) << paise << " " << micro;
        EXPECT_EQ(usd_cents(paise, micro + 1), (pow5 - 1) / 2) << paise << " " << micro;
        EXPECT_EQ(usd_cents(paise, micro - 1), (pow5 + 1) / 2) << paise << " " << micro;
        checked++;
    }
    EXPECT_GT(checked, 1000);
}

TEST(Money, TypicalCatalogPrices) {
    EXPECT_EQ(usd_of("4999", "83.123456"), "60.14");  // 6013.946...
    EXPECT_EQ(usd_of("999", "83.5"), "11.96");        // 1196.407...
    EXPECT_EQ(usd_of("4999", "84"), "59.51");         // 5951.190...
    EXPECT_EQ(usd_of("8400", "84"), "100.00");
    EXPECT_EQ(usd_of("0.01", "1000000"), "0.00");
}

TEST(Money, LargeValuesDoNotOverflow) {
    // The largest catalog price at the smallest rate: 10^18 cents.
    EXPECT_EQ(usd_cents(kMaxPaise, 1), 1'000'000'000'000'000'000ULL);
    EXPECT_EQ(usd_of("10000000000.00", "0.000001"), "10000000000000000.00");
    EXPECT_EQ(usd_of("10000000000", "1000000"), "10000.00");
    EXPECT_EQ(usd_of("9999999999.99", "0.000003"), "3333333333330000.00");

    // Outside the parsed ranges: exact where it fits, otherwise saturates.
    EXPECT_EQ(usd_cents(UINT64_MAX, UINT64_MAX), 1'000'000u);
    EXPECT_EQ(usd_cents(UINT64_MAX, 1'000'000), UINT64_MAX);
    EXPECT_EQ(usd_cents(UINT64_MAX, 1), UINT64_MAX);
    EXPECT_EQ(usd_cents(UINT64_MAX / 1'000'000, 1), UINT64_MAX / 1'000'000 * 1'000'000);
    EXPECT_EQ(usd_cents(1, 0), UINT64_MAX);
    EXPECT_EQ(usd_cents(0, 83'000'000), 0u);
}

TEST(Money, MatchesLongDivisionReference) {
    Rng rng{2024};
    for (int i = 0; i < 5000; i++) {
        uint64_t paise = rng.pick(kMaxPaise);
        uint64_t micro = rng.pick(kMaxRateMicro);
        ASSERT_EQ(std::to_string(usd_cents(paise, micro)), reference_cents(paise, micro))
            << "paise=" << paise << " micro=" << micro;
    }
    // Corners of the valid ranges.
    for (uint64_t paise : {uint64_t{1}, uint64_t{99}, kMaxPaise - 1, kMaxPaise}) {
        for (uint64_t micro : {uint64_t{1}, uint64_t{2}, uint64_t{83'123'456},
                               kMaxRateMicro - 1, kMaxRateMicro}) {
            EXPECT_EQ(std::to_string(usd_cents(paise, micro)), reference_cents(paise, micro))
                << "paise=" << paise << " micro=" << micro;
        }
    }
}
