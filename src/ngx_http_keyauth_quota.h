/*
 * Quotas: units a key and its account may use a period, counted in the
 * quota ledger (a file every worker maps, see src/core/quota_ledger.h).
 * keyauth_cost / keyauth_cost_header say what a call costs; the check comes
 * before the rate limit and charges nothing, the charge after it (or, for a
 * call whose upstream reports its cost, when the answer's header arrives).
 */
#ifndef NGX_HTTP_KEYAUTH_QUOTA_H
#define NGX_HTTP_KEYAUTH_QUOTA_H

#include "ngx_http_keyauth_module.h"


char *ngx_http_keyauth_cost(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_keyauth_cost_header(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* Before the rate (ngx_http_keyauth_decide's): NGX_HTTP_KEYAUTH_OK to go
 * on, _QUOTA_EXCEEDED (counted in usage, logged) or _UNAVAILABLE (logged).
 * ctx->cost and ctx->cost_header say what the call costs. */
ngx_http_keyauth_outcome_e ngx_http_keyauth_quota_check(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx,
    int64_t now_ms);

/* After the rate admitted the call: the static cost is charged
 * (NGX_HTTP_KEYAUTH_OK), or the call is refused as above when another
 * worker took the last units; a metered call has its reservation charged
 * (keyauth_cost, at least 1) and is left pending for the header filter. */
ngx_http_keyauth_outcome_e ngx_http_keyauth_quota_charge(
    ngx_http_request_t *r, ngx_http_keyauth_main_conf_t *kmcf,
    ngx_http_keyauth_ctx_t *ctx, int64_t now_ms);

/* Seconds until every quota used up refills (the latest reset of them);
 * -1 if one of them never refills; 0 if none is used up. */
int64_t ngx_http_keyauth_quota_retry(ngx_http_keyauth_ctx_t *ctx);

/* The access phase's 429 QUOTA_EXCEEDED with Retry-After (none if a quota
 * never refills): what the handler returns. */
ngx_int_t ngx_http_keyauth_quota_refuse(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

/* The header filter's: settles a metered call with what its upstream
 * reported and strips that header from the client's answer. */
void ngx_http_keyauth_quota_settle(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

/* A pending metered call whose upstream answered with X-Accel-Redirect:
 * settled with the units that answer reported (the access handler's, in
 * whatever location the redirect leads to, and the header filter's); the
 * header is then stripped from whatever answers. Nothing otherwise. */
void ngx_http_keyauth_quota_settle_redirect(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

/* The log phase's: a metered call whose answer never came (the client hung
 * up first) is charged the location's keyauth_cost. */
ngx_int_t ngx_http_keyauth_quota_log(ngx_http_request_t *r);

/* An admitted call redirected into this location: its cost stays the one of
 * the location that admitted it, but a cost header this location names is
 * still stripped from the answer (ngx_http_keyauth_quota_strip). */
void ngx_http_keyauth_quota_redirected(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

/* The header filter's: removes that header, charging nothing. */
void ngx_http_keyauth_quota_strip(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

/* The lowest balance of the quotas in force (may be negative); 0 if none. */
ngx_int_t ngx_http_keyauth_quota_remaining(ngx_http_keyauth_ctx_t *ctx,
    int64_t *remaining);


#endif /* NGX_HTTP_KEYAUTH_QUOTA_H */
