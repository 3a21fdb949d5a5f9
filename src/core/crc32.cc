#include "crc32.h"

#include "le.h"

namespace keyauth {
namespace {

// table[k][b]: the CRC of byte b followed by k zero bytes.
struct SlicingTables {
    uint32_t table[8][256];
    constexpr SlicingTables() : table() {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = b;
            for (int bit = 0; bit < 8; bit++) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
            table[0][b] = c;
        }
        for (int k = 1; k < 8; k++) {
            for (uint32_t b = 0; b < 256; b++) {
                const uint32_t prev = table[k - 1][b];
                table[k][b] = (prev >> 8) ^ table[0][prev & 0xff];
            }
        }
    }
};
constexpr SlicingTables kTables;

}  // namespace

uint32_t crc32_short(const unsigned char *p, size_t n) noexcept {
    const auto &t = kTables.table;
    uint32_t crc = 0xffffffffu;
    for (; n >= 8; p += 8, n -= 8) {
        const uint64_t w = load_le<uint64_t>(p) ^ crc;
        crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^
              t[4][(w >> 24) & 0xff] ^ t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^
              t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    }
    for (; n > 0; p++, n--) crc = t[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return crc ^ 0xffffffffu;
}

}  // namespace keyauth
