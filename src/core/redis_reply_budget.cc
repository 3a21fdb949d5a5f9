#include "redis_reply_budget.h"

#include <hiredis/hiredis.h>

namespace keyauth {
namespace {

using CreateString = void *(*)(const redisReadTask *, char *, size_t);
using CreateArray = void *(*)(const redisReadTask *, int);
using CreateInteger = void *(*)(const redisReadTask *, long long);
using CreateNil = void *(*)(const redisReadTask *);

struct HiredisObjects {
    CreateString string;
    CreateArray array;
    CreateInteger integer;
    CreateNil nil;
};

HiredisObjects &hiredis_objects() {
    static HiredisObjects o{};
    return o;
}

bool spend(const redisReadTask *task) {
    auto *b = static_cast<RedisReplyBudget *>(task->privdata);
    if (b->objects_left == 0) {
        b->refused = "more objects than the answer may hold";
        return false;
    }
    b->objects_left--;
    return true;
}

}  // namespace

redisReplyObjectFunctions *capped_reply_functions() {
    static redisReplyObjectFunctions fns;
    static bool made = false;
    if (!made) {
        redisReader *probe = redisReaderCreate();
        if (probe == nullptr) return nullptr;
        fns = *probe->fn;
        redisReaderFree(probe);
        hiredis_objects() = HiredisObjects{fns.createString, fns.createArray, fns.createInteger,
                                           fns.createNil};
        fns.createString = [](const redisReadTask *t, char *s, size_t n) -> void * {
            auto *b = static_cast<RedisReplyBudget *>(t->privdata);
            if (n > b->bytes_left) {
                b->refused = "more bytes than the answer may hold";
                return nullptr;
            }
            if (!spend(t)) return nullptr;
            b->bytes_left -= n;
            return hiredis_objects().string(t, s, n);
        };
        fns.createArray = [](const redisReadTask *t, int elements) -> void * {
            auto *b = static_cast<RedisReplyBudget *>(t->privdata);
            if (elements > b->max_elements) {
                b->refused = "an array longer than the answer may hold";
                return nullptr;
            }
            return spend(t) ? hiredis_objects().array(t, elements) : nullptr;
        };
        fns.createInteger = [](const redisReadTask *t, long long v) -> void * {
            return spend(t) ? hiredis_objects().integer(t, v) : nullptr;
        };
        fns.createNil = [](const redisReadTask *t) -> void * {
            return spend(t) ? hiredis_objects().nil(t) : nullptr;
        };
        made = true;
    }
    return &fns;
}

}  // namespace keyauth
