#include "usage_source.h"

#include "keyauth_schema.h"

namespace keyauth {

std::string default_usage_dir(const std::string &db) { return db + KA_USAGE_DIR_SUFFIX; }

std::unique_ptr<UsageSource> make_usage_source(const std::string &usage_dir,
                                               const etcd::ClientOptions &etcd,
                                               const std::string &etcd_prefix) {
    if (!etcd.endpoints.empty()) return make_etcd_usage_source(etcd, etcd_prefix);
    return make_lmdb_usage_source(usage_dir);
}

}  // namespace keyauth
