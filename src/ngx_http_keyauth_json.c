#include "ngx_http_keyauth_json.h"


ngx_table_elt_t *
ngx_http_keyauth_add_header(ngx_http_request_t *r, ngx_str_t *name,
    ngx_str_t *value)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NULL;
    }

    h->hash = 1;
    h->key = *name;
    h->value = *value;
#if (nginx_version >= 1023000)
    h->next = NULL;
#endif

    return h;
}


ngx_int_t
ngx_http_keyauth_send_json(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *body)
{
    static ngx_str_t  json = ngx_string("application/json");

    return ngx_http_keyauth_send(r, status, &json, body);
}


ngx_int_t
ngx_http_keyauth_send(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *content_type, ngx_str_t *body)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    r->headers_out.status = status;
    r->headers_out.content_length_n = body->len;
    r->headers_out.content_type = *content_type;
    r->headers_out.content_type_len = content_type->len;
    r->headers_out.content_type_lowcase = NULL;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = body->data;
    b->last = body->data + body->len;
    b->memory = body->len ? 1 : 0;
    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    rc = ngx_http_send_header(r);
    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_output_filter(r, &out);
}


ngx_int_t
ngx_http_keyauth_send_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *code, ngx_str_t *message)
{
    return ngx_http_keyauth_send_field_error(r, status, code, message, NULL);
}


ngx_int_t
ngx_http_keyauth_send_field_error(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *code, ngx_str_t *message, ngx_str_t *field)
{
    u_char     *p;
    ngx_str_t   body;

    static const char  head[] = "{\"error\":{\"code\":\"";
    static const char  mid[] = "\",\"message\":\"";
    static const char  named[] = "\",\"field\":\"";
    static const char  tail[] = "\"}}\n";

    body.len = sizeof(head) - 1 + code->len + sizeof(mid) - 1 + message->len
               + (field ? sizeof(named) - 1 + field->len : 0)
               + sizeof(tail) - 1;
    body.data = ngx_pnalloc(r->pool, body.len);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_cpymem(body.data, head, sizeof(head) - 1);
    p = ngx_cpymem(p, code->data, code->len);
    p = ngx_cpymem(p, mid, sizeof(mid) - 1);
    p = ngx_cpymem(p, message->data, message->len);

    if (field) {
        p = ngx_cpymem(p, named, sizeof(named) - 1);
        p = ngx_cpymem(p, field->data, field->len);
    }

    ngx_memcpy(p, tail, sizeof(tail) - 1);

    return ngx_http_keyauth_send_json(r, status, &body);
}


ngx_int_t
ngx_http_keyauth_get_only(ngx_http_request_t *r)
{
    ngx_str_t  allow, message;

    if (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) {
        return NGX_DECLINED;
    }

    ngx_str_set(&allow, "GET, HEAD");
    ngx_str_set(&message, "This resource is read with GET or HEAD");

    return ngx_http_keyauth_not_allowed(r, &allow, &message);
}


ngx_int_t
ngx_http_keyauth_not_allowed(ngx_http_request_t *r, ngx_str_t *allow,
    ngx_str_t *message)
{
    ngx_str_t  code;

    static ngx_str_t  name = ngx_string("Allow");

    if (ngx_http_keyauth_add_header(r, &name, allow) == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&code, "METHOD_NOT_ALLOWED");

    return ngx_http_keyauth_send_error(r, NGX_HTTP_NOT_ALLOWED, &code,
                                       message);
}
