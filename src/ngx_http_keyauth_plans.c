#include "ngx_http_keyauth_plans.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_store.h"


static ngx_str_t  ngx_http_keyauth_etag_name = ngx_string("ETag");
static ngx_str_t  ngx_http_keyauth_cache_control_name =
    ngx_string("Cache-Control");


ngx_int_t
ngx_http_keyauth_plans_handler(ngx_http_request_t *r)
{
    u_char                    *q;
    ngx_int_t                  rc;
    ngx_str_t                  code, message, value, body;
    ka_str_t                   base, uri, raw, *client, id;
    ngx_table_elt_t           *h;
    ka_plans_result_t          res;
    ka_plans_route_e           route;
    ngx_http_core_loc_conf_t  *clcf;

    rc = ngx_http_keyauth_get_only(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    /*
     * "/api/plans" or "/api/plans/" is the catalog, "/api/plans/{id}" a
     * plan, relative to the location's prefix (a prefix or exact-match
     * location: the directive refuses others). The client's own spelling
     * of the path must be the normalized one nginx matched the location
     * with; a URI the configuration made (rewrite, internal redirect,
     * subrequest) is taken as it is.
     */

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    base.data = (const char *) clcf->name.data;
    base.len = clcf->name.len;
    uri.data = (const char *) r->uri.data;
    uri.len = r->uri.len;

    client = NULL;

    if (!r->internal && r->valid_unparsed_uri) {
        /* the request target as sent, without its query string */
        raw.data = (const char *) r->unparsed_uri.data;
        q = ngx_strlchr(r->unparsed_uri.data,
                        r->unparsed_uri.data + r->unparsed_uri.len, '?');
        raw.len = (q ? q : r->unparsed_uri.data + r->unparsed_uri.len)
                  - r->unparsed_uri.data;
        client = &raw;
    }

    route = ka_plans_route(base, uri, client, &id);

    switch (route) {

    case KA_PLANS_ROUTE_CATALOG:
        ka_edge_plans(ngx_http_keyauth_edge(r->connection->log), NULL, 0,
                      &res);
        break;

    case KA_PLANS_ROUTE_PLAN:
        ka_edge_plans(ngx_http_keyauth_edge(r->connection->log), id.data,
                      id.len, &res);
        break;

    default:
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "keyauth: the core returned plans route %d, which "
                      "this module does not know; answered 404",
                      (int) route);
        /* fall through */

    case KA_PLANS_ROUTE_NOT_FOUND:
        ngx_str_set(&code, "PLAN_NOT_FOUND");
        ngx_str_set(&message, "No plan at this path: a plan is read at "
                              "/api/plans/{id}, the id spelled exactly");
        return ngx_http_keyauth_send_error(r, NGX_HTTP_NOT_FOUND, &code,
                                           &message);
    }

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

    default:
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "keyauth: the core returned plans status %d, which "
                      "this module does not know; answered 503",
                      (int) res.status);
        /* fall through */

    case KA_PLANS_UNAVAILABLE:
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
