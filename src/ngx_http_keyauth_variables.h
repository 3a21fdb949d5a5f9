/*
 * $keyauth_key_id, $keyauth_account_id, $keyauth_key_prefix,
 * $keyauth_rate_remaining, $keyauth_quota_remaining, $keyauth_plan_id,
 * $keyauth_key_name, $keyauth_key_meta and $keyauth_account_meta, for logs
 * and upstream headers.
 */
#ifndef NGX_HTTP_KEYAUTH_VARIABLES_H
#define NGX_HTTP_KEYAUTH_VARIABLES_H

#include "ngx_http_keyauth_module.h"

/* The module's preconfiguration: adds the variables. */
ngx_int_t ngx_http_keyauth_add_variables(ngx_conf_t *cf);

/* The accepted key's name and meta, its account's meta and plan id, read
 * from the store once a request on first use (r->pool); NULL when they
 * cannot be had (the key or account gone since its check). */
ka_key_details_t *ngx_http_keyauth_details(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

#endif /* NGX_HTTP_KEYAUTH_VARIABLES_H */
