// keyauthd's reads of what the edges publish to etcd (usage totals, quota
// use): one etcd client, made on first use, serving one call at a time.
// Any failure is StoreError kUnavailable, naming what went wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etcd_client.h"

namespace keyauth {

class EtcdPrefixReader {
public:
    explicit EtcdPrefixReader(etcd::ClientOptions options) : options_(std::move(options)) {}

    // Every key that starts with `prefix`; more than `limit` (0: no limit)
    // throws rather than answer part of them.
    std::vector<etcd::KeyValue> read(const std::string &prefix, int64_t limit = 0);

private:
    etcd::ClientOptions options_;
    std::mutex mu_;
    std::unique_ptr<etcd::Client> client_;
};

}  // namespace keyauth
