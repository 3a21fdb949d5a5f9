// hiredis's own reply objects within a budget (the reader's privdata): an
// array longer than max_elements is refused before anything is allocated for
// it (hiredis 0.14 has no limit of its own: "*2000000000" asks for 16 GB),
// and so is any object past objects_left, or a string past bytes_left, in
// one reply (small objects cost hiredis about 30 times their bytes). A
// refusal reads as hiredis's "out of memory"; `refused` says what it was.
// Shared by the module's keyauth_shared_limits exchange and keyauth-syncd's
// quota transport.
#pragma once

#include <cstddef>
#include <cstdint>

struct redisReplyObjectFunctions;

namespace keyauth {

struct RedisReplyBudget {
    size_t objects_left = 0;
    int max_elements = 0;
    size_t bytes_left = SIZE_MAX;  // string bytes, all of them
    const char *refused = nullptr;
};

// hiredis's default functions, each first spending from the budget; null
// only when hiredis cannot make a reader (out of memory).
redisReplyObjectFunctions *capped_reply_functions();

}  // namespace keyauth
