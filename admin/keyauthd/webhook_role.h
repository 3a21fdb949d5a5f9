// keyauthd's part in sending webhooks: the sender itself and, on many edges,
// the etcd lease that makes exactly one keyauthd the sender at a time
// (etcd_leader.h). On one host this keyauthd always sends.
#pragma once

#include <memory>

#include "etcd_leader.h"
#include "options.h"
#include "store.h"
#include "webhook_sender.h"

namespace keyauthd {

class WebhookRole {
public:
    WebhookRole(keyauth::Store &store, const keyauth::WebhookKey &key, keyauth::WebhookSenderOptions options,
                keyauth::QuotaUsageSource *usage, const Options &opt);
    ~WebhookRole();
    void start();
    void stop();  // resigns the lease: another keyauthd takes over at once
    bool sending() const;
    const keyauth::WebhookSenderCounts &counts() const { return sender_->counts(); }

private:
    std::unique_ptr<keyauth::etcd::LeaderLoop> lease_;  // none: one host
    std::unique_ptr<keyauth::WebhookSender> sender_;
};

}  // namespace keyauthd
