// One fake edge of the quota exchange (many-edge mode, issue 28): a usage
// dir with its usage env (the edge id) and the quota ledger its nginx
// workers charge, charged as they charge it; and its exchange's options on
// real etcd members (tests/etcd_cluster.h).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "etcd_cluster.h"
#include "quota_exchange.h"
#include "quota_ledger.h"
#include "quota_period.h"
#include "usage_env.h"

namespace keyauth::testing::quota {

inline const std::string kPrefix = "/keyauth/1";
constexpr int64_t kDecemberFirst = 1796083200000;  // 2026-12-01T00:00:00Z
constexpr int64_t kDay = 86400000;

inline Id id_of(unsigned char c) {
    Id id;
    id.fill(c);
    return id;
}

// One fake edge: its usage dir, with a usage env (so, an edge id) and the
// ledger its workers charge.
struct Edge {
    explicit Edge(const std::string &dir, bool with_env = true) : usage_db(dir) {
        std::string err;
        if (with_env) {
            env = UsageEnv::open(usage_db, err);
            EXPECT_TRUE(env) << err;
        } else {
            EXPECT_TRUE(ensure_usage_dir(usage_db, err)) << err;
        }
        ledger = QuotaLedger::open(usage_db + "/" KA_QUOTA_LEDGER_FILE, true, err, 1024);
        EXPECT_TRUE(ledger) << err;
    }
    // Charges `cost` to a subject's day quota at now_ms, as a worker does
    // (fit: refused past `units`, counting the others' use).
    bool charge(QuotaSubject s, const Id &id, uint64_t cost, int64_t now_ms, uint64_t units = 1000) {
        QuotaRef ref;
        const uint16_t tag = quota_period_tag(KA_QUOTA_DAY, now_ms);
        if (!ledger->find(s, id.data(), tag, now_ms, ref)) return false;
        uint64_t after = 0;
        return ledger->charge(s, id.data(), ref, tag, cost, units, true, now_ms, &after) ==
               QuotaLedger::Charge::kCharged;
    }
    uint64_t used(QuotaSubject s, const Id &id, int64_t now_ms) const {
        return ledger->used(s, id.data(), quota_period_tag(KA_QUOTA_DAY, now_ms));
    }

    std::string usage_db;
    std::unique_ptr<UsageEnv> env;
    std::unique_ptr<QuotaLedger> ledger;
};

inline syncd::QuotaExchangeOptions exchange_options(const EtcdCluster &etcd, const std::string &usage_db) {
    syncd::QuotaExchangeOptions o;
    o.etcd.endpoints = etcd.endpoint_list();
    o.etcd.request_timeout = std::chrono::seconds(2);
    o.prefix = kPrefix;
    o.usage_db = usage_db;
    return o;
}

}  // namespace keyauth::testing::quota
