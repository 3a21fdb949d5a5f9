// CRC-32 (zlib's: reflected 0xEDB88320, initial and final inversion) of a
// few dozen bytes: the checksum of a key's format, checked on every request.
// zlib's crc32() goes byte by byte below 47 bytes, one table load after
// another (about 130 ns over a key's 35 bytes on the bench VM). Where the CPU
// has PCLMULQDQ, 8 bytes at a time are folded by carry-less multiplication:
// no table, so nothing to miss in a cache the kernel's network work keeps
// emptying. Elsewhere, slicing-by-8 (8 independent table loads a step). Both
// give zlib's crc32(0, p, n): tests/crc32_test.cc and fuzz/fuzz_bearer.cc
// hold them to it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keyauth {

uint32_t crc32_short(const unsigned char *p, size_t n) noexcept;

namespace crc32_detail {
// The two ways, for the tests; crc32_short picks one when the module loads.
uint32_t by_tables(const unsigned char *p, size_t n) noexcept;
bool have_clmul() noexcept;
uint32_t by_clmul(const unsigned char *p, size_t n) noexcept;  // only if have_clmul()
}  // namespace crc32_detail

}  // namespace keyauth
