// Little-endian loads and stores for the on-disk records (schema is LE on
// every host; LMDB memory is not aligned, so everything goes through memcpy).
#pragma once

#include <cstdint>
#include <cstring>

namespace keyauth {

template <typename T>
inline T load_le(const unsigned char *p) {
    T v = 0;
    for (size_t i = 0; i < sizeof(T); i++) {
        v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
    }
    return v;
}

template <typename T>
inline void store_le(unsigned char *p, T v) {
    for (size_t i = 0; i < sizeof(T); i++) {
        p[i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
    }
}

}  // namespace keyauth
