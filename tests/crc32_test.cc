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

TEST(Crc32Short, EqualsZlibAtEveryLengthAndAlignment) {
    std::mt19937 rng(20261127);
    std::vector<unsigned char> buf(200);
    for (int round = 0; round < 50; round++) {
        for (auto &b : buf) b = static_cast<unsigned char>(rng());
        for (size_t offset = 0; offset < 8; offset++) {
            for (size_t n = 0; n + offset <= 130; n++) {
                ASSERT_EQ(crc32_short(buf.data() + offset, n), zlib_crc(buf.data() + offset, n))
                    << "length " << n << " at offset " << offset;
            }
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
