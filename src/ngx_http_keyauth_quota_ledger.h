/*
 * The quota ledger's life in the workers (src/core/quota_ledger.h): its
 * size (keyauth_quota_size), where it lives (the usage directory, also with
 * keyauth_usage_db off), its opening in every worker, and worker 0's quota
 * timer: the ledger's pages to disk every keyauth_usage_interval, and the
 * sweep that releases the credits of revoked keys, counts the live slots
 * and grows the ledger before it fills. The request path is
 * ngx_http_keyauth_quota.c's.
 */
#ifndef NGX_HTTP_KEYAUTH_QUOTA_LEDGER_H
#define NGX_HTTP_KEYAUTH_QUOTA_LEDGER_H

#include "ngx_http_keyauth_module.h"


char *ngx_http_keyauth_quota_size(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* From the module's postconfiguration, after the usage defaults: the
 * ledger's directory (the usage directory, or its default when
 * keyauth_usage_db is off) and size. */
ngx_int_t ngx_http_keyauth_quota_conf(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf);

ngx_int_t ngx_http_keyauth_quota_init_process(ngx_cycle_t *cycle);
void ngx_http_keyauth_quota_exit_process(ngx_cycle_t *cycle);

/* This worker's ledger, NULL while it cannot be opened (keys with a quota
 * then get 503, and a timer tries again). */
ka_quota_ledger_t *ngx_http_keyauth_quota_ledger(void);

/* keyauth_status's lines of the ledger, appended at p (at most
 * NGX_HTTP_KEYAUTH_QUOTA_STATUS_LEN bytes). */
#define NGX_HTTP_KEYAUTH_QUOTA_STATUS_LEN  (768 + 3 * NGX_INT64_LEN)
u_char *ngx_http_keyauth_quota_status(u_char *p);


#endif /* NGX_HTTP_KEYAUTH_QUOTA_LEDGER_H */
