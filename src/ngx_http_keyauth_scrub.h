/*
 * Wiping credentials of finished requests from worker memory.
 */
#ifndef NGX_HTTP_KEYAUTH_SCRUB_H
#define NGX_HTTP_KEYAUTH_SCRUB_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


/* Installs the post-read handler that, for every request carrying an
 * Authorization header, wipes the request's header bytes and its upstream
 * request copy when the request ends. */
ngx_int_t ngx_http_keyauth_scrub_init(ngx_conf_t *cf);


#endif /* NGX_HTTP_KEYAUTH_SCRUB_H */
