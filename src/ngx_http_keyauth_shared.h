/*
 * keyauth_shared_limits: edges share what their keys spend through Redis.
 * The request path only counts (ngx_http_keyauth_rate.c); here one worker
 * (worker 0) exchanges every interval, off the request path, over a
 * non-blocking connection on nginx's event loop: it publishes the counts and
 * folds what the other edges spent into the zone's rate states. The
 * protocol is the core's (shared_exchange.h); Redis down, slow or wrong
 * leaves every edge with its local limits, said once in the error log and
 * always in keyauth_status.
 */
#ifndef NGX_HTTP_KEYAUTH_SHARED_H
#define NGX_HTTP_KEYAUTH_SHARED_H

#include "ngx_http_keyauth_module.h"


char *ngx_http_keyauth_shared_limits(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

ngx_int_t ngx_http_keyauth_shared_init_process(ngx_cycle_t *cycle);
void ngx_http_keyauth_shared_exit_process(ngx_cycle_t *cycle);

/* keyauth_status's lines for the exchange: p has room for
 * NGX_HTTP_KEYAUTH_SHARED_STATUS_LEN bytes. */
#define NGX_HTTP_KEYAUTH_SHARED_STATUS_LEN  (5120 + 12 * NGX_ATOMIC_T_LEN)
u_char *ngx_http_keyauth_shared_status(u_char *p,
    ngx_http_keyauth_zone_t *zone);

#endif /* NGX_HTTP_KEYAUTH_SHARED_H */
