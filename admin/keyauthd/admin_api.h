// The admin API (DESIGN, *Admin API*): how the business's own services
// (signup, payment, billing, support) drive keyauth over HTTP, each with an
// admin token carrying exactly the scopes it needs. keyauthd serves it on
// its own listener (--admin-listen), never on the console's. Every route
// calls the rules the console API and keyauthctl call (the Store, and the
// key routes' KeyApi), never a copy of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "admin_tokens.h"
#include "http_exchange.h"
#include "key_api.h"
#include "quota_usage.h"
#include "store.h"
#include "usage_source.h"
#include "webhook_signing.h"

namespace keyauth {

class AdminApi {
public:
    AdminApi(Store &store, UsageSource *usage = nullptr, QuotaUsageSource *quota = nullptr)
        : store_(store), usage_(usage), keys_(store, usage, quota) {}

    // The deployment's webhook key (webhook_signing.h), which a new
    // endpoint's secret is derived from; without one, POST
    // /v1/admin/webhooks answers 503 WEBHOOKS_UNAVAILABLE.
    void set_webhook_key(const std::optional<WebhookKey> &key) { webhook_key_ = key; }
    // What POST /v1/admin/keys/report-leak does to a key (--leak-action).
    void set_leak_action(LeakAction action) { leak_action_ = action; }

    // Never throws: every failure becomes a JSON error response.
    HttpResponse handle(const HttpRequest &req) noexcept;

    // A call, as its handler sees it: the request, the token that made it
    // (and so the audit trail's actor) and the route's {id} segments.
    struct Call {
        const HttpRequest &req;
        AdminToken token;
        Actor actor;
        std::vector<std::string> params;
    };
    using Handler = HttpResponse (AdminApi::*)(const Call &);
    struct Route {
        const char *method;
        const char *path;  // a template: "{id}" stands for one segment
        uint32_t scope;
        Handler handler;
    };

private:
    HttpResponse route(const HttpRequest &req);

    HttpResponse create_account(const Call &c);
    HttpResponse list_accounts(const Call &c);
    HttpResponse get_account(const Call &c);
    HttpResponse update_account(const Call &c);
    HttpResponse put_plan(const Call &c);
    HttpResponse create_session(const Call &c);
    HttpResponse list_account_keys(const Call &c);
    HttpResponse create_account_key(const Call &c);
    HttpResponse get_key(const Call &c);
    HttpResponse update_key(const Call &c);
    HttpResponse roll_key(const Call &c);
    HttpResponse revoke_key(const Call &c);
    HttpResponse report_leak(const Call &c);
    HttpResponse get_usage(const Call &c);
    HttpResponse get_usage_report(const Call &c);
    HttpResponse list_audit(const Call &c);
    HttpResponse put_plans(const Call &c);
    HttpResponse put_fx(const Call &c);
    // admin_webhooks.cc
    HttpResponse create_webhook(const Call &c);
    HttpResponse list_webhooks(const Call &c);
    HttpResponse delete_webhook(const Call &c);
    HttpResponse list_webhook_deliveries(const Call &c);
    std::optional<Id> webhook_param(const Call &c, HttpResponse &missing);

    // The account of the route's first {id}, or the 404 that answers it.
    std::optional<Id> account_param(const Call &c, HttpResponse &missing);
    // The owner of the key of the route's first {id}, or the 404.
    std::optional<Id> key_owner(const Call &c, HttpResponse &missing);
    // The account object of the admin API: GET /v1/account's, with its
    // externalId.
    HttpResponse account_answer(const Id &account, int status);

    static const Route kRoutes[];
    friend std::string_view admin_route_template(std::string_view path) noexcept;

    Store &store_;
    UsageSource *usage_;
    KeyApi keys_;
    std::optional<WebhookKey> webhook_key_;
    LeakAction leak_action_ = LeakAction::kRevoke;
};

// The route template of a path of the admin API (metrics label it so, never
// by a client's path), or "other".
std::string_view admin_route_template(std::string_view path) noexcept;

}  // namespace keyauth
