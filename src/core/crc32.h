// CRC-32 (zlib's: reflected 0xEDB88320, initial and final inversion) of a
// few dozen bytes, eight at a time (slicing-by-8). zlib's crc32() goes byte
// by byte below 47 bytes, one table load after another; over a key's 35
// bytes that chain was the dearest step of the request path (about 130 ns
// a request on the bench VM, by perf). Here each 8 bytes take 8 independent
// loads. The same value as zlib's crc32(0, p, n): tests/crc32_test.cc and
// fuzz/fuzz_bearer.cc hold it to zlib.
#pragma once

#include <cstddef>
#include <cstdint>

namespace keyauth {

uint32_t crc32_short(const unsigned char *p, size_t n) noexcept;

}  // namespace keyauth
