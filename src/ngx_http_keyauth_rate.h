/*
 * Per-key rate limits: the keyauth_zone shared memory, the check after a
 * key is authenticated, 429 RATE_LIMITED, and the RateLimit-Policy /
 * RateLimit response headers (IETF httpapi ratelimit-headers draft).
 */
#ifndef NGX_HTTP_KEYAUTH_RATE_H
#define NGX_HTTP_KEYAUTH_RATE_H

#include "ngx_http_keyauth_module.h"

char *ngx_http_keyauth_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

/* NGX_OK to go on, or what the access handler returns (429 sent). */
ngx_int_t ngx_http_keyauth_rate_limit(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx);

ngx_int_t ngx_http_keyauth_rate_filter_init(ngx_conf_t *cf);

#endif /* NGX_HTTP_KEYAUTH_RATE_H */
