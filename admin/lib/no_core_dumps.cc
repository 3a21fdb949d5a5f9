#include "no_core_dumps.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>

namespace keyauth {

bool refuse_core_dumps(std::string &error) {
#if defined(__SANITIZE_ADDRESS__)
    // The sanitizer build leaves it be: LeakSanitizer's exit check ptraces
    // the process's own threads, and ASan turns core dumps off anyway.
    (void)error;
    return true;
#else
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0) return true;
    error = std::strerror(errno);
    return false;
#endif
}

}  // namespace keyauth
