#include "ngx_http_keyauth_plans.h"
#include "ngx_http_keyauth_json.h"


static ngx_str_t  ngx_http_keyauth_etag_name = ngx_string("ETag");
static ngx_str_t  ngx_http_keyauth_cache_control_name =
    ngx_string("Cache-Control");


ngx_int_t
ngx_http_keyauth_plans_handler(ngx_http_request_t *r)
{
    ngx_int_t           rc;
    ngx_str_t           id, code, message, value, body;
    ngx_table_elt_t    *h;
    ka_plans_result_t   res;

    rc = ngx_http_keyauth_get_only(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    /* "/api/plans" or "/api/plans/" is the catalog, "/api/plans/{id}" a plan */

    ngx_http_keyauth_uri_tail(r, &id);

    ka_edge_plans(ngx_http_keyauth_edge(r->connection->log),
                  id.len ? (const char *) id.data : NULL, id.len, &res);

    switch (res.status) {

    case KA_PLANS_OK:
        break;

    case KA_PLANS_NOT_FOUND:
        ngx_str_set(&code, "PLAN_NOT_FOUND");
        ngx_str_set(&message, "No plan has this id");
        return ngx_http_keyauth_send_error(r, NGX_HTTP_NOT_FOUND, &code,
                                           &message);

    case KA_PLANS_NO_RATE:
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth: no exchange rate is set "
                      "(keyauthctl fx set RATE); /api/plans answers 503");
        ngx_str_set(&code, "EXCHANGE_RATE_UNAVAILABLE");
        ngx_str_set(&message, "USD prices are unavailable: no exchange rate "
                              "is set");
        return ngx_http_keyauth_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           &code, &message);

    default: /* KA_PLANS_UNAVAILABLE */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "keyauth: plan catalog unavailable: %s", res.reason);
        ngx_str_set(&code, "CATALOG_UNAVAILABLE");
        ngx_str_set(&message, "The plan catalog is temporarily unavailable");
        return ngx_http_keyauth_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           &code, &message);
    }

    /* the core's bytes live until its next render: the response gets a copy */

    body.len = res.body.len;
    body.data = ngx_pnalloc(r->pool, res.body.len + res.etag.len);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    value.len = res.etag.len;
    value.data = ngx_cpymem(body.data, res.body.data, res.body.len);
    ngx_memcpy(value.data, res.etag.data, res.etag.len);

    /* nginx's not_modified filter answers If-None-Match from this ETag */
    h = ngx_http_keyauth_add_header(r, &ngx_http_keyauth_etag_name, &value);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    r->headers_out.etag = h;

    /* prices follow the exchange rate: caches must revalidate */
    ngx_str_set(&value, "no-cache");
    if (ngx_http_keyauth_add_header(r, &ngx_http_keyauth_cache_control_name,
                                    &value)
        == NULL)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_keyauth_send_json(r, NGX_HTTP_OK, &body);
}
