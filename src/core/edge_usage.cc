// The usage half of the C API in keyauth_core.h.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "c_api_support.h"
#include "keyauth_core.h"
#include "usage_env.h"
#include "usage_table.h"

using keyauth::lock_of;
using keyauth::RateLock;
using keyauth::say;
static_assert(static_cast<int>(keyauth::UsageOutcome::kAllowed) == KA_USAGE_ALLOWED &&
                  static_cast<int>(keyauth::UsageOutcome::kRateLimited) == KA_USAGE_RATE_LIMITED &&
                  static_cast<int>(keyauth::UsageOutcome::kQuotaExceeded) == KA_USAGE_QUOTA_EXCEEDED &&
                  static_cast<int>(keyauth::UsageOutcome::kUnitsOnly) == KA_USAGE_UNITS_ONLY,
              "the C and C++ outcomes agree");
using keyauth::UsageDelta;
using keyauth::UsageEnv;
using keyauth::UsageTable;

struct ka_usage_env_s {
    std::unique_ptr<UsageEnv> env;
};

namespace {

// One write transaction per this many slots: a bounded buffer, whatever the
// zone's size.
constexpr size_t kSlotsPerTxn = 4096;

}  // namespace

extern "C" {

int ka_usage_table_format(void *mem, size_t size) { return UsageTable::format(mem, size); }

int ka_usage_table_attach(void *mem, size_t size) {
    return UsageTable::attach(mem, size) != nullptr;
}

size_t ka_usage_table_slots(void *mem) { return static_cast<UsageTable *>(mem)->slots(); }

uint64_t ka_usage_table_drops(void *mem) { return static_cast<UsageTable *>(mem)->drops(); }

int ka_usage_count(void *table, const ka_auth_result_t *key, ka_usage_outcome_e outcome,
                   uint64_t units, int64_t now_ms, uint64_t now_ns, const ka_lock_t *lock) {
    keyauth::UsageCount c = static_cast<UsageTable *>(table)->count(
        key->account_id_bin, key->key_id_bin, static_cast<keyauth::UsageOutcome>(outcome), units,
        now_ms, now_ns, lock_of(lock));
    return c.warn;
}

ka_usage_env_t *ka_usage_env_open(const char *path, uint32_t days_kept, char *err,
                                  size_t err_len) {
    try {
        std::string why;
        auto env = UsageEnv::open(path, why, days_kept);
        if (!env) {
            say(err, err_len, why);
            return nullptr;
        }
        return new ka_usage_env_s{std::move(env)};
    } catch (...) {
        say(err, err_len, "out of memory");
        return nullptr;
    }
}

void ka_usage_env_close(ka_usage_env_t *env) { delete env; }

int ka_usage_env_replaced(const ka_usage_env_t *env) { return env->env->replaced(); }

long ka_usage_flush_part(void *table, ka_usage_env_t *env, size_t *from, int64_t now_ms,
                         int64_t idle_ms, const ka_lock_t *lock, char *err,
                         size_t err_len) {
    auto *t = static_cast<UsageTable *>(table);
    const RateLock l = lock_of(lock);
    std::vector<UsageDelta> deltas;
    try {
        deltas.reserve(kSlotsPerTxn);  // so that collecting never throws
    } catch (...) {
        say(err, err_len, "out of memory");
        return -1;
    }
    const size_t begin = std::min(*from, t->slots());
    const size_t end = std::min(begin + kSlotsPerTxn, t->slots());
    t->collect(begin, end, now_ms, idle_ms, l,
               [&deltas](const UsageDelta &d) { deltas.push_back(d); });
    if (!deltas.empty()) {
        std::string why;
        if (!env->env->add(deltas.data(), deltas.size(), now_ms, why)) {
            // these go back; the slots after them were not touched
            for (const UsageDelta &d : deltas) t->restore(d, l);
            say(err, err_len, why);
            return -1;
        }
    }
    *from = end;
    // the walk's end: what is past its keeping goes, traffic or not (a
    // failure is tried again at the next collection's end)
    if (end == t->slots()) {
        std::string ignored;
        (void)env->env->age_out(now_ms, ignored);
    }
    return static_cast<long>(deltas.size());
}

}  // extern "C"
