/*
 * The decision on an accepted key, one code path for the access phase and
 * keyauth_verify, so that both spend the same keyauth_zone, charge the same
 * quota ledger and count the same usage and keyauth_status outcomes: the
 * quota first (charging nothing: a used-up key spends no rate), the rate
 * (GCRA), then the charge of an admitted call. Nothing is sent: each caller
 * answers in its own way (the access phase 429/503, the verify API 200).
 */
#ifndef NGX_HTTP_KEYAUTH_DECIDE_H
#define NGX_HTTP_KEYAUTH_DECIDE_H

#include "ngx_http_keyauth_module.h"


/* ctx->auth is KA_AUTH_OK, ctx->cost and ctx->cost_header are set. Returns
 * (and sets ctx->outcome to) NGX_HTTP_KEYAUTH_OK (admitted and charged),
 * _RATE_LIMITED, _QUOTA_EXCEEDED (charged nothing) or _UNAVAILABLE (no
 * ledger room: logged), already counted in keyauth_status. */
ngx_http_keyauth_outcome_e ngx_http_keyauth_decide(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx);

/* The core's reason for a verdict, in the error log at its level. */
void ngx_http_keyauth_log_auth(ngx_http_request_t *r, ka_auth_result_t *auth);


#endif /* NGX_HTTP_KEYAUTH_DECIDE_H */
