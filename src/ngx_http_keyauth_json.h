/*
 * JSON responses of the keyauth module: one error layout everywhere,
 * {"error":{"code":"...","message":"..."}}, and a sender for content handlers.
 */
#ifndef NGX_HTTP_KEYAUTH_JSON_H
#define NGX_HTTP_KEYAUTH_JSON_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

/* Sends a complete response; returns what a content handler returns. */
ngx_int_t ngx_http_keyauth_send(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *content_type, ngx_str_t *body);
ngx_int_t ngx_http_keyauth_send_json(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *body);

/* Builds the error body in r->pool and sends it. code and message are
 * trusted ASCII without quotes or backslashes. */
ngx_int_t ngx_http_keyauth_send_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *code, ngx_str_t *message);

/* The same with "field" (VALIDATION_ERROR's: the field refused); field
 * may be NULL, and is trusted ASCII like code and message. */
ngx_int_t ngx_http_keyauth_send_field_error(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *code, ngx_str_t *message, ngx_str_t *field);

/* 405 METHOD_NOT_ALLOWED with Allow: allow; returns what the content
 * handler returns. */
ngx_int_t ngx_http_keyauth_not_allowed(ngx_http_request_t *r,
    ngx_str_t *allow, ngx_str_t *message);

/* Read-only resources (the plan catalog, the IP lookup): NGX_DECLINED for
 * GET and HEAD, else sends 405 METHOD_NOT_ALLOWED with Allow and returns
 * what the content handler returns. */
ngx_int_t ngx_http_keyauth_get_only(ngx_http_request_t *r);

/* Adds a response header (r->pool); NGX_ERROR when out of memory. */
ngx_table_elt_t *ngx_http_keyauth_add_header(ngx_http_request_t *r,
    ngx_str_t *name, ngx_str_t *value);

#endif /* NGX_HTTP_KEYAUTH_JSON_H */
