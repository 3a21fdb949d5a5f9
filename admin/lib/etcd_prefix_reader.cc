#include "etcd_prefix_reader.h"

#include "etcd_codec.h"
#include "store_error.h"

namespace keyauth {
namespace {

[[noreturn]] void unavailable(const std::string &why) {
    throw StoreError(StoreError::Kind::kUnavailable, "", why);
}

}  // namespace

std::vector<etcd::KeyValue> EtcdPrefixReader::read(const std::string &prefix, int64_t limit) {
    etcd::RangeRequest r;
    r.key = prefix;
    r.range_end = etcd::prefix_range_end(prefix);
    r.limit = limit;
    etcd::RangeResponse answer;
    etcd::Status st;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!client_) {
            std::string error;
            client_ = etcd::Client::make(options_, error);
            if (!client_) unavailable("etcd client: " + error);
        }
        st = client_->range(r, answer);
    }
    if (!st.ok()) unavailable(std::string("etcd range failed (") + etcd::errc_name(st.code) + "): " + st.message);
    if (answer.more) unavailable("more records under " + prefix + " than " + std::to_string(limit));
    return std::move(answer.kvs);
}

}  // namespace keyauth
