/*
 * keyauth_plans: the public plan catalog, GET /api/plans and
 * GET /api/plans/{id}, rendered by the core and served from its cache.
 */
#ifndef NGX_HTTP_KEYAUTH_PLANS_H
#define NGX_HTTP_KEYAUTH_PLANS_H

#include "ngx_http_keyauth_module.h"

ngx_int_t ngx_http_keyauth_plans_handler(ngx_http_request_t *r);

#endif /* NGX_HTTP_KEYAUTH_PLANS_H */
