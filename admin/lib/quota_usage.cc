#include "quota_usage.h"

#include <mutex>

#include "keyauth_schema.h"
#include "quota_period.h"

namespace keyauth {
namespace {

class LedgerQuotaUsage : public QuotaUsageSource {
public:
    explicit LedgerQuotaUsage(std::string path) : path_(std::move(path)) {}

    uint64_t used(QuotaSubject subject, const Id &id, uint8_t period, int64_t now_ms) override {
        const QuotaLedger *ledger = open();
        return ledger ? ledger->used(subject, id.data(), quota_period_tag(period, now_ms)) : 0;
    }

private:
    // Opened once it exists: before the edge made it, nothing was used.
    const QuotaLedger *open() {
        std::lock_guard<std::mutex> lock(mu_);
        if (!ledger_) {
            std::string err;
            ledger_ = QuotaLedger::open(path_, /*writable=*/false, err);
        }
        return ledger_.get();
    }

    std::string path_;
    std::mutex mu_;
    std::unique_ptr<QuotaLedger> ledger_;
};

// TODO(issue 28, "Exact on one host, bounded across edges": many edges):
// sum what every edge's syncd publishes of each quota to etcd. Until then
// keyauthd on etcd shows used 0 (remaining = units).
class EtcdQuotaUsage : public QuotaUsageSource {
public:
    uint64_t used(QuotaSubject, const Id &, uint8_t, int64_t) override { return 0; }
};

}  // namespace

std::unique_ptr<QuotaUsageSource> make_ledger_quota_usage(std::string ledger_path) {
    return std::make_unique<LedgerQuotaUsage>(std::move(ledger_path));
}

std::unique_ptr<QuotaUsageSource> make_quota_usage_source(const std::string &db, const etcd::ClientOptions &etcd) {
    if (!etcd.endpoints.empty()) return std::make_unique<EtcdQuotaUsage>();
    return make_ledger_quota_usage(db + KA_USAGE_DIR_SUFFIX + "/" + KA_QUOTA_LEDGER_FILE);
}

}  // namespace keyauth
