#include "webhook_role.h"

#include <stdexcept>

#include "access_log.h"
#include "etcd_keyspace.h"

namespace keyauthd {

WebhookRole::WebhookRole(keyauth::Store &store, const keyauth::WebhookKey &key,
                         keyauth::WebhookSenderOptions options, keyauth::QuotaUsageSource *usage,
                         const Options &opt) {
    if (!opt.etcd.empty()) {
        keyauth::etcd::LeaderOptions lo;
        std::string error;
        if (!keyauth::etcd::parse_endpoints(opt.etcd, lo.client.endpoints, error))
            throw std::runtime_error("--etcd: " + error);
        lo.client.ca_file = opt.etcd_cacert;
        lo.client.cert_file = opt.etcd_cert;
        lo.client.key_file = opt.etcd_key;
        const std::string prefix =
            opt.etcd_prefix.empty() ? std::string(keyauth::kDefaultEtcdPrefix) : opt.etcd_prefix;
        // after the tables syncd watches (like quota/ and usage/): no edge
        // hears of a takeover
        lo.key = prefix + "/webhook_sender";
        lo.identity = keyauth::etcd::make_holder_identity();
        lo.ttl = std::chrono::seconds(opt.webhook_lease_seconds);
        auto leader = keyauth::etcd::EtcdLeader::make(lo, error);
        if (!leader) throw std::runtime_error("webhook sender's lease: " + error);
        lease_ = std::make_unique<keyauth::etcd::LeaderLoop>(
            std::move(leader), [](bool leading, const std::string &holder) {
                keyauth::emit({{"event", leading ? "webhook_sender_leading" : "webhook_sender_following"},
                               {"holder", holder}});
            });
    }
    keyauth::etcd::LeaderLoop *lease = lease_.get();
    sender_ = std::make_unique<keyauth::WebhookSender>(
        store, key, std::move(options), usage, [lease] { return !lease || lease->still_leader(); });
}

WebhookRole::~WebhookRole() { stop(); }

void WebhookRole::start() { sender_->start(); }

void WebhookRole::stop() {
    sender_->stop();
    if (lease_) lease_->stop(true);
}

bool WebhookRole::sending() const { return !lease_ || lease_->still_leader(); }

}  // namespace keyauthd
