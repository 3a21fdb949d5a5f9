// Keeping secrets out of core dumps.
#pragma once

#include <string>

namespace keyauth {

// Marks this process non-dumpable, as ssh-agent does: a crash writes no core
// file (its memory holds console tokens and freshly made secrets) and other
// users cannot ptrace it or read its /proc memory. Returns false, with the
// reason, when the kernel refuses.
bool refuse_core_dumps(std::string &error);

}  // namespace keyauth
