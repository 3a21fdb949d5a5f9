// The usage of keys on many edges: every edge's keyauth-syncd publishes its
// cumulative totals under "<prefix>/usage/<account><key>/<edge>"; the sum
// over the edges is the key's usage. One range read per call.
#include <mutex>

#include "etcd_codec.h"
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
        : options_(std::move(options)), prefix_(std::move(prefix)) {}

    std::map<Id, KeyUsage> usage_of(const Id &account, const std::vector<Id> &keys) override {
        std::map<Id, KeyUsage> out;
        for (const Id &k : keys) out[k];
        const std::string within = etcd_usage_account_prefix(prefix_, account);
        etcd::RangeRequest r;
        r.key = within;
        r.range_end = etcd::prefix_range_end(within);
        r.limit = kMaxRecords;
        etcd::RangeResponse answer;
        etcd::Status st;
        {
            // one client, one call at a time: usage is read once per list
            std::lock_guard<std::mutex> lock(mu_);
            if (!client_) {
                std::string error;
                client_ = etcd::Client::make(options_, error);
                if (!client_) unavailable("etcd client: " + error);
            }
            st = client_->range(r, answer);
        }
        if (!st.ok()) unavailable(std::string("etcd range failed (") + etcd::errc_name(st.code) + "): " + st.message);
        if (answer.more) unavailable("more usage records than " + std::to_string(kMaxRecords));
        for (const etcd::KeyValue &kv : answer.kvs) {
            Id key;
            KeyUsage u;
            if (!parse_etcd_usage_key(within, kv.key, key) || !decode_usage_record(kv.value, u)) continue;
            auto it = out.find(key);
            if (it != out.end()) it->second.add(u);
        }
        return out;
    }

private:
    [[noreturn]] static void unavailable(const std::string &why) {
        throw StoreError(StoreError::Kind::kUnavailable, "", why);
    }

    etcd::ClientOptions options_;
    std::string prefix_;
    std::mutex mu_;
    std::unique_ptr<etcd::Client> client_;
};

}  // namespace

std::unique_ptr<UsageSource> make_etcd_usage_source(etcd::ClientOptions options, std::string prefix) {
    return std::make_unique<EtcdUsageSource>(std::move(options), std::move(prefix));
}

}  // namespace keyauth
