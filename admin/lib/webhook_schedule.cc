#include "webhook_schedule.h"

namespace keyauth {
namespace {

constexpr int64_t kSecond = 1000, kMinute = 60 * kSecond, kHour = 60 * kMinute;
constexpr int64_t kRetryDelays[kWebhookAttempts - 1] = {5 * kSecond, 5 * kMinute, 30 * kMinute, 2 * kHour,
                                                        5 * kHour,   10 * kHour,  10 * kHour};

}  // namespace

std::optional<int64_t> webhook_retry_delay_ms(int attempts_made, uint32_t random) {
    if (attempts_made < 1 || attempts_made >= kWebhookAttempts) return std::nullopt;
    const int64_t base = kRetryDelays[attempts_made - 1];
    // uniform in [0.9, 1.1) of the base
    const int64_t spread = base / 5;
    return base - base / 10 + static_cast<int64_t>(random % static_cast<uint32_t>(spread));
}

DeliveryUpdate settle_webhook_attempt(const Delivery &d, long status, const std::string &error, int64_t now_ms,
                                      uint32_t random) {
    DeliveryUpdate u;
    u.next = d;
    Delivery &n = u.next;
    n.attempts = d.attempts + 1;
    n.last_attempt_ms = now_ms;
    n.last_status = status;
    n.last_error = status ? "" : error.substr(0, 200);
    if (status >= 200 && status < 300) {
        n.status = DeliveryStatus::kDelivered;
        n.finished_ms = now_ms;
        return u;
    }
    if (status == 410) {
        n.status = DeliveryStatus::kDead;
        n.finished_ms = now_ms;
        u.disable_webhook = true;
        return u;
    }
    if (auto wait = webhook_retry_delay_ms(n.attempts, random)) {
        n.next_ms = now_ms + *wait;
        return u;
    }
    n.status = DeliveryStatus::kDead;
    n.finished_ms = now_ms;
    return u;
}

}  // namespace keyauth
