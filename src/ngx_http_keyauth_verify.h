/*
 * keyauth_verify: the verify API for callers that are not behind nginx
 * (DESIGN's *Verify API*). POST {"key", "scopes"?, "cost"?, "ip"?} gets the
 * access phase's own decision (ngx_http_keyauth_decide: the same zone,
 * quota ledger, usage and keyauth_status counts) as a 200 JSON answer.
 */
#ifndef NGX_HTTP_KEYAUTH_VERIFY_H
#define NGX_HTTP_KEYAUTH_VERIFY_H

#include "ngx_http_keyauth_module.h"

ngx_int_t ngx_http_keyauth_verify_handler(ngx_http_request_t *r);

/* A keyauth_verify location keeps bodies up to KA_VERIFY_MAX_BODY in
 * memory whatever client_body_buffer_size says: from the module's
 * merge_loc_conf, with the location's core configuration merged. */
void ngx_http_keyauth_verify_merge(ngx_http_core_loc_conf_t *clcf);

#endif /* NGX_HTTP_KEYAUTH_VERIFY_H */
