/*
 * $keyauth_key_id, $keyauth_account_id, $keyauth_key_prefix and
 * $keyauth_rate_remaining, for logs and upstream headers.
 */
#ifndef NGX_HTTP_KEYAUTH_VARIABLES_H
#define NGX_HTTP_KEYAUTH_VARIABLES_H

#include "ngx_http_keyauth_module.h"

/* The module's preconfiguration: adds the variables. */
ngx_int_t ngx_http_keyauth_add_variables(ngx_conf_t *cf);

#endif /* NGX_HTTP_KEYAUTH_VARIABLES_H */
