// Little-endian loads and stores for the on-disk records (schema is LE on
// every host; LMDB memory is not aligned, so everything goes through memcpy).
// On a little-endian host a load or store is one move; callgrind counted the
// byte loop at about 85 instructions for a 12-byte id, on every request.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace keyauth {

template <typename T>
inline T load_le(const unsigned char *p) {
    static_assert(std::is_integral<T>::value, "integers only");
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
#else
    T v = 0;
    for (size_t i = 0; i < sizeof(T); i++) {
        v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
    }
    return v;
#endif
}

template <typename T>
inline void store_le(unsigned char *p, T v) {
    static_assert(std::is_integral<T>::value, "integers only");
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(p, &v, sizeof v);
#else
    for (size_t i = 0; i < sizeof(T); i++) {
        p[i] = static_cast<unsigned char>(static_cast<uint64_t>(v) >> (8 * i));
    }
#endif
}

}  // namespace keyauth
