#include "crc32.h"

#include "le.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__)

// The constants of the carry-less way, in the reflected bit order (bit i of
// a w-bit value is the coefficient of x^(w-1-i)).
//
// Register V, 64 bits, pending: the CRC so far is V·x^32 mod P. Folding in
// the next 8 bytes W: V' = V·x^64 + W (mod P), and V·x^64 = H·x^96 + L·x^64
// for V's high-degree half H and low-degree half L, so two independent
// multiplications by (x^96 mod P) and (x^64 mod P) keep V at 64 bits. At
// the end V·x^32 mod P is H·(x^64 mod P) + L·x^32, reduced by Barrett.
// A product of two 32-bit reflected values lands one bit short of a 64-bit
// reflected one, hence the constants shifted left by one.
constexpr uint32_t kPoly = 0x04c11db7u;  // P without x^32, normal order

constexpr uint32_t x_pow_mod_p(int n) {  // x^n mod P, normal order
    uint32_t r = 1;
    for (int i = 0; i < n; i++) r = (r & 0x80000000u) ? (r << 1) ^ kPoly : r << 1;
    return r;
}
constexpr uint32_t reflect32(uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}
constexpr uint64_t kXPow64 = static_cast<uint64_t>(reflect32(x_pow_mod_p(64))) << 1;
constexpr uint64_t kXPow96 = static_cast<uint64_t>(reflect32(x_pow_mod_p(96))) << 1;
// Barrett: floor(x^64 / P) and P itself, 33 bits each, reflected.
constexpr uint64_t kMu = 0x1f7011641ull;
constexpr uint64_t kP = 0x1db710641ull;

// A length that is not a multiple of 8 is read as if led by 8 - r zero
// bytes, from the register that those zeros take to 0xffffffff (the usual
// start): kLeadIn[z] undoes z zero bytes of the byte-wise step.
struct LeadIn {
    uint32_t state[8];
    constexpr LeadIn() : state() {
        const auto &t = kTables.table[0];
        for (int z = 0; z < 8; z++) {
            uint32_t c = 0xffffffffu;
            for (int i = 0; i < z; i++) {
                // forward: c' = (c >> 8) ^ t[c & 0xff]; the top byte of t[b]
                // differs for every b, so it names the byte that went out
                uint32_t b = 0;
                while ((t[b] >> 24) != (c >> 24)) b++;
                c = ((c ^ t[b]) << 8) | b;
            }
            state[z] = c;
        }
    }
};
constexpr LeadIn kLeadIn;

#endif

}  // namespace

namespace crc32_detail {

uint32_t by_tables(const unsigned char *p, size_t n) noexcept {
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

#if defined(__x86_64__)

bool have_clmul() noexcept {
    __builtin_cpu_init();  // it may run before libgcc's own constructor does
    return __builtin_cpu_supports("pclmul");
}

__attribute__((target("pclmul"))) uint32_t by_clmul(const unsigned char *p, size_t n) noexcept {
    if (n < 8) return by_tables(p, n);
    const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
    const __m128i fold = _mm_set_epi64x(static_cast<long long>(kXPow64), static_cast<long long>(kXPow96));
    const __m128i barrett = _mm_set_epi64x(static_cast<long long>(kMu), static_cast<long long>(kP));

    const size_t r = n % 8;
    __m128i v;
    if (r != 0) {  // the first r bytes, after 8 - r zeros (n >= 8: the load stays inside)
        v = _mm_cvtsi64_si128(static_cast<long long>((load_le<uint64_t>(p) << (64 - 8 * r)) ^
                                                     kLeadIn.state[8 - r]));
        p += r;
        n -= r;
    } else {
        v = _mm_cvtsi64_si128(static_cast<long long>(load_le<uint64_t>(p) ^ 0xffffffffu));
        p += 8;
        n -= 8;
    }
    for (; n >= 8; p += 8, n -= 8) {
        const __m128i high_half = _mm_clmulepi64_si128(_mm_and_si128(v, low32), fold, 0x00);
        const __m128i low_half = _mm_clmulepi64_si128(_mm_srli_epi64(v, 32), fold, 0x10);
        v = _mm_xor_si128(_mm_xor_si128(high_half, low_half),
                          _mm_cvtsi64_si128(static_cast<long long>(load_le<uint64_t>(p))));
    }
    // V·x^32 mod P: to 64 bits, then Barrett to 32.
    v = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(v, low32), fold, 0x10), _mm_srli_epi64(v, 32));
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(v, low32), barrett, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
    v = _mm_xor_si128(v, t);
    return static_cast<uint32_t>(static_cast<uint64_t>(_mm_cvtsi128_si64(v)) >> 32) ^ 0xffffffffu;
}

#else

bool have_clmul() noexcept { return false; }
uint32_t by_clmul(const unsigned char *p, size_t n) noexcept { return by_tables(p, n); }

#endif

}  // namespace crc32_detail

namespace {
// Chosen once, when the library is loaded (the CPU does not change).
const bool kUseClmul = crc32_detail::have_clmul();
}  // namespace

uint32_t crc32_short(const unsigned char *p, size_t n) noexcept {
    return kUseClmul ? crc32_detail::by_clmul(p, n) : crc32_detail::by_tables(p, n);
}

}  // namespace keyauth
