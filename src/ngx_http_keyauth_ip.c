#include "ngx_http_keyauth_ip.h"
#include "ngx_http_keyauth_json.h"


static void ngx_http_keyauth_uri_tail(ngx_http_request_t *r, ngx_str_t *tail);


ngx_int_t
ngx_http_keyauth_ip_handler(ngx_http_request_t *r)
{
    ngx_int_t   rc;
    ngx_str_t   ip, body, code, message;

    rc = ngx_http_keyauth_get_only(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    /* the address as nginx decoded it from the path */
    ngx_http_keyauth_uri_tail(r, &ip);

    body.data = ngx_pnalloc(r->pool, KA_IP_JSON_MAX);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    body.len = ka_ip_lookup_json((const char *) ip.data, ip.len,
                                 (char *) body.data, KA_IP_JSON_MAX);

    if (body.len == 0) {
        ngx_str_set(&code, "INVALID_IP");
        ngx_str_set(&message, "The path does not end in an IPv4 or IPv6 "
                              "address");
        return ngx_http_keyauth_send_error(r, NGX_HTTP_BAD_REQUEST, &code,
                                           &message);
    }

    return ngx_http_keyauth_send_json(r, NGX_HTTP_OK, &body);
}


/* What follows the location's prefix in the (decoded) URI, without its
 * leading "/": the {ip_address} of /v1/ip/{ip_address}. Empty when nothing
 * follows. (keyauth_plans routes exactly: ka_plans_route.) */
static void
ngx_http_keyauth_uri_tail(ngx_http_request_t *r, ngx_str_t *tail)
{
    ngx_http_core_loc_conf_t  *clcf;

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    ngx_str_null(tail);

    if (clcf->name.len > r->uri.len
        || ngx_strncmp(r->uri.data, clcf->name.data, clcf->name.len) != 0)
    {
        return;
    }

    tail->data = r->uri.data + clcf->name.len;
    tail->len = r->uri.len - clcf->name.len;

    if (tail->len && tail->data[0] == '/') {
        tail->data++;
        tail->len--;
    }
}
