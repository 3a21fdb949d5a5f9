/*
 * ip_lookup: the IP lookup tool, GET /v1/ip/{ip_address}. Put keyauth on
 * and keyauth_scope ip:read in front of it.
 */
#ifndef NGX_HTTP_KEYAUTH_IP_H
#define NGX_HTTP_KEYAUTH_IP_H

#include "ngx_http_keyauth_module.h"

ngx_int_t ngx_http_keyauth_ip_handler(ngx_http_request_t *r);

#endif /* NGX_HTTP_KEYAUTH_IP_H */
