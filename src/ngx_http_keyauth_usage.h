/*
 * Per-key usage: the request path counts in keyauth_zone
 * (ngx_http_keyauth_rate.c); here one worker (worker 0) collects the counts
 * every keyauth_usage_interval (and at every UTC hour, so that an hour's
 * buckets are complete soon after it) into the usage environment, each
 * count in the hour it was made, off the request
 * path, and every worker once more when it exits (any worker may collect:
 * a count is taken by exactly one). The usage environment is not the key
 * store: a worker holding both keeps LMDB's rule of one handle per
 * environment and process.
 */
#ifndef NGX_HTTP_KEYAUTH_USAGE_H
#define NGX_HTTP_KEYAUTH_USAGE_H

#include "ngx_http_keyauth_module.h"

char *ngx_http_keyauth_usage_db(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_keyauth_usage_interval(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
char *ngx_http_keyauth_usage_history(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

/* From the module's postconfiguration, once keyauth_db is set: the
 * defaults (keyauth_db's path + ".usage", 30 s). */
ngx_int_t ngx_http_keyauth_usage_conf(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf);

/* keyauth_db's path + ".usage" into dir: the usage directory's default,
 * and the quota ledger's home when keyauth_usage_db is off. */
ngx_int_t ngx_http_keyauth_usage_default_dir(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_str_t *dir);

/* Counts one request of an authenticated key in keyauth_zone (atomics; the
 * zone's lock only to give a new key its slot): its outcome and the units
 * it was charged. Nothing without a zone. */
void ngx_http_keyauth_usage_count(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx,
    ka_usage_outcome_e outcome, uint64_t units, int64_t now_ms,
    uint64_t now_ns);

ngx_int_t ngx_http_keyauth_usage_init_process(ngx_cycle_t *cycle);
void ngx_http_keyauth_usage_exit_process(ngx_cycle_t *cycle);

#endif /* NGX_HTTP_KEYAUTH_USAGE_H */
