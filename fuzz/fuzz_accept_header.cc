// The Accept header (admin API's usage report): never a crash, and a
// quality is always within [0, 1].
#include <string_view>

#include "accept_header.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    for (std::string_view type : {"text/csv", "application/json"}) {
        const double q = keyauth::accept_quality(in, type);
        if (!(q >= 0 && q <= 1)) __builtin_trap();
    }
    return 0;
}
