#include "crc32.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <vector>

using keyauth::crc32_short;

namespace {
uint32_t zlib_crc(const unsigned char *p, size_t n) {
    return static_cast<uint32_t>(crc32(0L, p, static_cast<uInt>(n)));
}
}  // namespace

TEST(Crc32Short, KnownValue) {
    const unsigned char check[] = "123456789";
    EXPECT_EQ(crc32_short(check, 9), 0xcbf43926u);  // the CRC-32 check value
    EXPECT_EQ(crc32_short(check, 0), 0u);
}

namespace {

// Each way alone (crc32_short uses one of them, chosen by the CPU), at every
// length, so both the carry-less way's lead-in (a length not a multiple of
// 8) and the table way's tail are crossed.
void expect_zlib_at_every_length_and_alignment(uint32_t (*crc)(const unsigned char *, size_t)) {
    std::mt19937 rng(20261127);
    std::vector<unsigned char> buf(200);
    for (int round = 0; round < 50; round++) {
        for (auto &b : buf) b = static_cast<unsigned char>(rng());
        for (size_t offset = 0; offset < 8; offset++) {
            for (size_t n = 0; n + offset <= 130; n++) {
                ASSERT_EQ(crc(buf.data() + offset, n), zlib_crc(buf.data() + offset, n))
                    << "length " << n << " at offset " << offset;
            }
        }
    }
}

}  // namespace

TEST(Crc32Short, EqualsZlibAtEveryLengthAndAlignment) {
    expect_zlib_at_every_length_and_alignment(crc32_short);
}

TEST(Crc32Short, TheTableWayEqualsZlib) {
    expect_zlib_at_every_length_and_alignment(keyauth::crc32_detail::by_tables);
}

TEST(Crc32Short, TheCarryLessWayEqualsZlib) {
    if (!keyauth::crc32_detail::have_clmul()) GTEST_SKIP() << "this CPU has no PCLMULQDQ";
    expect_zlib_at_every_length_and_alignment(keyauth::crc32_detail::by_clmul);
}

TEST(Crc32Short, TheCarryLessWayEqualsZlibOnAllOnesAndZeros) {
    // the lead-in registers and the folds meet their extreme inputs
    if (!keyauth::crc32_detail::have_clmul()) GTEST_SKIP() << "this CPU has no PCLMULQDQ";
    for (unsigned char fill : {0x00, 0xff}) {
        std::vector<unsigned char> buf(64, fill);
        for (size_t n = 0; n <= buf.size(); n++) {
            ASSERT_EQ(keyauth::crc32_detail::by_clmul(buf.data(), n), zlib_crc(buf.data(), n))
                << "length " << n << " of " << int(fill);
        }
    }
}

TEST(Crc32Short, EverySingleBitFlipChangesIt) {
    std::vector<unsigned char> buf(35, 'a');
    const uint32_t base = crc32_short(buf.data(), buf.size());
    for (size_t i = 0; i < buf.size(); i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= static_cast<unsigned char>(1u << bit);
            EXPECT_NE(crc32_short(buf.data(), buf.size()), base) << i << ":" << bit;
            buf[i] ^= static_cast<unsigned char>(1u << bit);
        }
    }
}
