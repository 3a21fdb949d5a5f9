#include "quota_usage.h"

#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "etcd_prefix_reader.h"
#include "keyauth_schema.h"
#include "quota_keyspace.h"
#include "quota_period.h"

namespace keyauth {
namespace {

class LedgerQuotaUsage : public QuotaUsageSource {
public:
    explicit LedgerQuotaUsage(std::string path) : path_(std::move(path)) {}

    uint64_t used(QuotaSubject subject, const Id &id, uint8_t period, int64_t now_ms) override {
        std::shared_ptr<QuotaLedger> ledger = open();
        return ledger ? ledger->used(subject, id.data(), quota_period_tag(period, now_ms)) : 0;
    }

private:
    // Opened once it exists: before the edge made it, nothing was used. A
    // file made anew there (nginx started on a new usage dir, a restore) is
    // opened in its place: the console shows what the edge counts now. One
    // removed keeps being read: nginx's workers still count in it until
    // they restart.
    std::shared_ptr<QuotaLedger> open() {
        std::lock_guard<std::mutex> lock(mu_);
        struct stat st;
        if (::stat(path_.c_str(), &st) != 0) return ledger_;
        const std::pair<dev_t, ino_t> file{st.st_dev, st.st_ino};
        if (ledger_ && file != file_) ledger_.reset();
        if (!ledger_) {
            std::string err;
            ledger_ = QuotaLedger::open(path_, /*writable=*/false, err);
            file_ = file;
        }
        return ledger_;
    }

    std::string path_;
    std::mutex mu_;
    std::shared_ptr<QuotaLedger> ledger_;  // shared: a reader keeps it while another reopens
    std::pair<dev_t, ino_t> file_{};
};

// Many edges: every edge's keyauth-syncd keeps its own use of the subject
// in each period class at "<prefix>/quota/<class><id>/<edge>"; the sum over
// the edges, of the period asked for, is the fleet's. An edge of an earlier
// build keeps it under the subject byte alone: read too, and counted where
// the edge has no key of the class (one put by each build is the same use).
class EtcdQuotaUsage : public QuotaUsageSource {
public:
    EtcdQuotaUsage(etcd::ClientOptions options, std::string prefix)
        : reader_(std::move(options)), prefix_(std::move(prefix)) {}

    uint64_t used(QuotaSubject subject, const Id &id, uint8_t period, int64_t now_ms) override {
        const uint16_t tag = quota_period_tag(period, now_ms);
        const std::string quota_prefix = etcd_quota_prefix(prefix_);
        // by edge: the use, and whether it came from a class key
        std::map<std::string, std::pair<bool, uint64_t>> by_edge;
        for (const uint8_t cls : {quota_slot_class(subject, tag), static_cast<uint8_t>(subject)}) {
            for (const etcd::KeyValue &kv : reader_.read(etcd_quota_class_prefix(prefix_, cls, id))) {
                QuotaKeyName name;
                QuotaUse use;
                if (!parse_etcd_quota_key(quota_prefix, kv.key, name) || !decode_quota_use(kv.value, use) ||
                    use.tag != tag) {
                    continue;  // another period's (a day over, not yet deleted)
                }
                const bool classed = name.cls != static_cast<uint8_t>(subject);
                auto &seen = by_edge[std::string(reinterpret_cast<const char *>(name.edge_id),
                                                 KA_USAGE_EDGE_ID_LEN)];
                if (!seen.first) seen = {classed, use.used};
            }
        }
        uint64_t sum = 0;
        for (const auto &[edge, use] : by_edge) sum = sum + use.second < sum ? UINT64_MAX : sum + use.second;
        return sum;
    }

private:
    EtcdPrefixReader reader_;
    std::string prefix_;
};

}  // namespace

std::unique_ptr<QuotaUsageSource> make_ledger_quota_usage(std::string ledger_path) {
    return std::make_unique<LedgerQuotaUsage>(std::move(ledger_path));
}

std::unique_ptr<QuotaUsageSource> make_etcd_quota_usage(etcd::ClientOptions options, std::string prefix) {
    return std::make_unique<EtcdQuotaUsage>(std::move(options), std::move(prefix));
}

std::unique_ptr<QuotaUsageSource> make_quota_usage_source(const std::string &usage_dir,
                                                          const etcd::ClientOptions &etcd,
                                                          const std::string &etcd_prefix) {
    if (!etcd.endpoints.empty()) return make_etcd_quota_usage(etcd, etcd_prefix);
    return make_ledger_quota_usage(usage_dir + "/" + KA_QUOTA_LEDGER_FILE);
}

}  // namespace keyauth
