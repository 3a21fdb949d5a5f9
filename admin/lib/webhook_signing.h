// Signing webhooks the Standard Webhooks way: the secret is "whsec_" and the
// base64 of 32 bytes; a message is signed as
//   webhook-signature: v1,<base64 of HMAC-SHA256(secret bytes, id "." timestamp "." body)>
// so a receiver using that specification's own libraries verifies it as is.
//
// The store keeps no secret (house rule: only hashes of secrets are stored).
// An endpoint's secret is derived, HMAC-SHA256(deployment key, endpoint id),
// from a deployment key that lives in a file beside the programs that send
// or make webhooks (--webhook-key-file; on one host by default beside the
// store, mode 0600): a copy of the store or of etcd gives no signing secret,
// and deleting an endpoint and making a new one gives a new secret.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ids.h"

namespace keyauth {

using WebhookKey = std::array<unsigned char, 32>;
using WebhookSecret = std::array<unsigned char, 32>;

// The deployment key at `path` (64 hex digits), or none with a reason
// (missing, unreadable, malformed, or readable by others than its owner).
std::optional<WebhookKey> load_webhook_key(const std::string &path, std::string &error);
// The key at `path`, made (0600, from the CSPRNG; made by root, owned by
// the owner of its directory, the store's writer) if there is none yet.
std::optional<WebhookKey> load_or_make_webhook_key(const std::string &path, std::string &error);

// One host's default: inside the LMDB environment's directory, which only
// the writer may write (and the key itself only the writer read).
std::string default_webhook_key_file(const std::string &db);

WebhookSecret webhook_secret(const WebhookKey &key, const Id &webhook);
// "whsec_" + base64: what the endpoint's owner is shown once.
std::string webhook_secret_text(const WebhookSecret &secret);

// The webhook-signature header's value for one attempt.
std::string webhook_signature(const WebhookSecret &secret, std::string_view message_id, int64_t timestamp_s,
                              std::string_view body);

std::string base64_encode(const unsigned char *data, size_t len);

}  // namespace keyauth
