/*
 * keyauth_status: Prometheus text metrics. Outcome counters live in a small
 * shared zone of their own, so every worker adds to the same numbers and they
 * survive reloads.
 */
#ifndef NGX_HTTP_KEYAUTH_STATUS_H
#define NGX_HTTP_KEYAUTH_STATUS_H

#include "ngx_http_keyauth_module.h"

/* From the module's postconfiguration, once keyauth_db is set: adds the
 * counters' zone, "keyauth_stats" (another zone of that name is refused). */
ngx_int_t ngx_http_keyauth_stats_zone(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf);

void ngx_http_keyauth_count(ngx_http_keyauth_main_conf_t *kmcf,
    ngx_http_keyauth_outcome_e outcome);

/* Units charged to quotas. */
void ngx_http_keyauth_count_units(ngx_http_keyauth_main_conf_t *kmcf,
    uint64_t units);
ngx_int_t ngx_http_keyauth_status_handler(ngx_http_request_t *r);

#endif /* NGX_HTTP_KEYAUTH_STATUS_H */
