// The fixture of the usage readers' tests: a real store and, beside it, the
// usage env an edge's collector writes, on a clock two days after kNine (the
// store's now, which reads clip to what is kept at).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "lmdb_backend.h"
#include "rfc3339.h"
#include "temp_dir.h"
#include "usage_delta.h"
#include "usage_env.h"
#include "usage_source.h"

namespace keyauth::testing {

class UsageStoreFixture : public ::testing::Test {
protected:
    // 2026-11-20T09:00:00Z
    static constexpr int64_t kNine = 1795165200000;

    TempDir dir;
    Store store{std::make_unique<LmdbBackend>(dir.sub("db"))};
    std::unique_ptr<UsageSource> usage = make_usage_source(default_usage_dir(dir.sub("db")), {}, "");

    UsageStoreFixture() {
        store.set_clock([] { return kNine + 2 * kMsPerDay; });
    }

    KeyRecord make_key(const Id &account) {
        KeySpec spec;
        spec.name = "k";
        spec.scopes = {"ip:read"};
        spec.requested_rpm = 10;
        return store.create_key(account, spec, Actor::operator_named("test")).key;
    }

    // What the edge's collector does at bucket_ms.
    void count(const KeyRecord &k, BucketCounts c, int64_t bucket_ms) {
        std::string err;
        auto env = UsageEnv::open(dir.sub("db") + KA_USAGE_DIR_SUFFIX, err);
        ASSERT_TRUE(env) << err;
        const UsageDelta d = usage_delta(k.account_id, k.key_id, c, bucket_ms);
        ASSERT_TRUE(env->add(&d, 1, bucket_ms, err)) << err;
    }
};

}  // namespace keyauth::testing
