/*
 * Per-key rate limits: the keyauth_zone shared memory, 429 RATE_LIMITED
 * (the check is ngx_http_keyauth_decide's), and the RateLimit-Policy /
 * RateLimit response headers (IETF httpapi ratelimit-headers draft).
 */
#ifndef NGX_HTTP_KEYAUTH_RATE_H
#define NGX_HTTP_KEYAUTH_RATE_H

#include "ngx_http_keyauth_module.h"

char *ngx_http_keyauth_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

/* The access phase's 429 RATE_LIMITED with Retry-After, once
 * ngx_http_keyauth_decide refused the call: what the handler returns. */
ngx_int_t ngx_http_keyauth_rate_refuse(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);

ngx_int_t ngx_http_keyauth_rate_filter_init(ngx_conf_t *cf);

#endif /* NGX_HTTP_KEYAUTH_RATE_H */
