// The usage of keys on many edges: every edge's keyauth-syncd publishes its
// cumulative totals under "<prefix>/usage/<account><key>/<edge>"; the sum
// over the edges is the key's usage. One range read per call.
#include "etcd_prefix_reader.h"
#include "store_error.h"
#include "usage_keyspace.h"
#include "usage_source.h"

namespace keyauth {
namespace {

// An account's keys times the edges; beyond this the read is refused
// rather than grow without bound.
constexpr int64_t kMaxRecords = 1'000'000;

class EtcdUsageSource final : public UsageSource {
public:
    EtcdUsageSource(etcd::ClientOptions options, std::string prefix)
        : reader_(std::move(options)), prefix_(std::move(prefix)) {}

    std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) override {
        std::map<Id, KeyUsage> out;
        for (const Id &k : keys) out[k];
        const std::string within = etcd_usage_account_prefix(prefix_, account);
        for (const etcd::KeyValue &kv : reader_.read(within, kMaxRecords)) {
            Id key;
            KeyUsage u;
            if (!parse_etcd_usage_key(within, kv.key, key) || !decode_usage_record(kv.value, u)) continue;
            auto it = out.find(key);
            if (it != out.end()) it->second.add(u);
        }
        return out;
    }

    // Not published to etcd yet (issue 29): said, never zeros.
    void buckets(Granularity, uint32_t, uint32_t, const Id *, const Id *, const BucketSink &) override {
        throw StoreError(StoreError::Kind::kUnavailable, "",
                         "usage over time is not published to etcd yet");
    }

private:
    EtcdPrefixReader reader_;  // usage is read once per list
    std::string prefix_;
};

}  // namespace

std::unique_ptr<UsageSource> make_etcd_usage_source(etcd::ClientOptions options, std::string prefix) {
    return std::make_unique<EtcdUsageSource>(std::move(options), std::move(prefix));
}

}  // namespace keyauth
