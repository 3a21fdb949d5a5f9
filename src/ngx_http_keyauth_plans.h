/*
 * keyauth_plans: the public plan catalog, GET /api/plans and
 * GET /api/plans/{id}, rendered by the core and served from its cache.
 */
#ifndef NGX_HTTP_KEYAUTH_PLANS_H
#define NGX_HTTP_KEYAUTH_PLANS_H

#include "ngx_http_keyauth_module.h"

char *ngx_http_keyauth_plans(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

#endif /* NGX_HTTP_KEYAUTH_PLANS_H */
