/*
 * The $keyauth_* variables: the key id, account id and display prefix of the
 * request's key, the requests its rate still admits and the lowest balance
 * of its quotas; its name and meta, its account's meta and plan id. Never
 * the secret.
 * Not cacheable (a value read before the access phase must not stick), but
 * each is formatted once a request, into the request's context. The access
 * phase reads none of name, meta or plan: the first variable that shows one
 * reads them from the store (ka_edge_key_details), so a configuration that
 * uses none of them pays nothing.
 */

#include "ngx_http_keyauth_variables.h"
#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_store.h"


typedef enum {
    NGX_HTTP_KEYAUTH_VAR_KEY_ID = 0,
    NGX_HTTP_KEYAUTH_VAR_ACCOUNT_ID,
    NGX_HTTP_KEYAUTH_VAR_KEY_PREFIX,
    NGX_HTTP_KEYAUTH_VAR_RATE_REMAINING,
    NGX_HTTP_KEYAUTH_VAR_QUOTA_REMAINING,
    NGX_HTTP_KEYAUTH_VAR_PLAN_ID,
    NGX_HTTP_KEYAUTH_VAR_KEY_NAME,
    NGX_HTTP_KEYAUTH_VAR_KEY_META,
    NGX_HTTP_KEYAUTH_VAR_ACCOUNT_META
} ngx_http_keyauth_var_e;


static ngx_int_t ngx_http_keyauth_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_keyauth_detail_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);


static ngx_http_variable_t  ngx_http_keyauth_vars[] = {

    { ngx_string("keyauth_key_id"), NULL, ngx_http_keyauth_variable,
      NGX_HTTP_KEYAUTH_VAR_KEY_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_account_id"), NULL, ngx_http_keyauth_variable,
      NGX_HTTP_KEYAUTH_VAR_ACCOUNT_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_key_prefix"), NULL, ngx_http_keyauth_variable,
      NGX_HTTP_KEYAUTH_VAR_KEY_PREFIX, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_rate_remaining"), NULL, ngx_http_keyauth_variable,
      NGX_HTTP_KEYAUTH_VAR_RATE_REMAINING, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_quota_remaining"), NULL, ngx_http_keyauth_variable,
      NGX_HTTP_KEYAUTH_VAR_QUOTA_REMAINING, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_plan_id"), NULL, ngx_http_keyauth_detail_variable,
      NGX_HTTP_KEYAUTH_VAR_PLAN_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_key_name"), NULL, ngx_http_keyauth_detail_variable,
      NGX_HTTP_KEYAUTH_VAR_KEY_NAME, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_key_meta"), NULL, ngx_http_keyauth_detail_variable,
      NGX_HTTP_KEYAUTH_VAR_KEY_META, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("keyauth_account_meta"), NULL,
      ngx_http_keyauth_detail_variable,
      NGX_HTTP_KEYAUTH_VAR_ACCOUNT_META, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_int_t
ngx_http_keyauth_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_keyauth_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_keyauth_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    int64_t                  remaining;
    ngx_http_keyauth_ctx_t  *ctx;

    /* found again after a redirect to a location without keyauth (try_files
     * to a named location, error_page), and from subrequests */
    ctx = ngx_http_keyauth_get_ctx(r->main);

    if (ctx == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    switch (data) {

    case NGX_HTTP_KEYAUTH_VAR_KEY_PREFIX:
        v->len = ctx->auth.prefix_len;
        v->data = (u_char *) ctx->auth.prefix;
        break;

    case NGX_HTTP_KEYAUTH_VAR_KEY_ID:
        /* only for an accepted key: with "satisfy any" a refused key's
         * account must not reach the upstream as if it had passed */
        if (ctx->auth.verdict != KA_AUTH_OK) {
            v->len = 0;
            break;
        }

        if (!ctx->key_id_text_set) {
            ka_format_key_id(ctx->auth.key_id_bin, (char *) ctx->key_id_text);
            ctx->key_id_text_set = 1;
        }

        v->len = KA_ID_TEXT_LEN;
        v->data = ctx->key_id_text;
        break;

    case NGX_HTTP_KEYAUTH_VAR_ACCOUNT_ID:
        if (ctx->auth.verdict != KA_AUTH_OK) {
            v->len = 0;
            break;
        }

        if (!ctx->account_id_text_set) {
            ka_format_account_id(ctx->auth.account_id_bin,
                                 (char *) ctx->account_id_text);
            ctx->account_id_text_set = 1;
        }

        v->len = KA_ID_TEXT_LEN;
        v->data = ctx->account_id_text;
        break;

    case NGX_HTTP_KEYAUTH_VAR_QUOTA_REMAINING:
        /* formatted on each read: a metered call's charge lands after the
         * access phase, before the access log reads it */
        if (!ngx_http_keyauth_quota_remaining(ctx, &remaining)) {
            v->len = 0;
            break;
        }

        ctx->quota_len = ngx_sprintf(ctx->quota_text, "%L", remaining)
                         - ctx->quota_text;
        v->len = ctx->quota_len;
        v->data = ctx->quota_text;
        break;

    default: /* NGX_HTTP_KEYAUTH_VAR_RATE_REMAINING */
        if (!ctx->rate_checked) {
            v->len = 0;
            break;
        }

        /* the key is charged once a request, so this is formatted once */
        if (ctx->remaining_len == 0) {
            ctx->remaining_len = ngx_sprintf(ctx->remaining_text, "%uD",
                                             ctx->rate.remaining)
                                 - ctx->remaining_text;
        }

        v->len = ctx->remaining_len;
        v->data = ctx->remaining_text;
        break;
    }

    if (v->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}


ka_key_details_t *
ngx_http_keyauth_details(ngx_http_request_t *r, ngx_http_keyauth_ctx_t *ctx)
{
    char              *buf;
    ka_key_details_t  *d;

    if (ctx->details_read) {
        return ctx->details;
    }

    ctx->details_read = 1;

    d = ngx_palloc(r->pool, sizeof(ka_key_details_t) + KA_KEY_DETAILS_MAX);
    if (d == NULL) {
        return NULL;
    }

    buf = (char *) (d + 1);

    if (!ka_edge_key_details(ngx_http_keyauth_edge(r->connection->log),
                             &ctx->auth, buf, KA_KEY_DETAILS_MAX, d))
    {
        /* gone since the check, or a store without records by id */
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "keyauth: key details not to be had");
        return NULL;
    }

    ctx->details = d;

    return d;
}


static ngx_int_t
ngx_http_keyauth_detail_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ka_str_t                *s;
    ka_key_details_t        *d;
    ngx_http_keyauth_ctx_t  *ctx;

    ctx = ngx_http_keyauth_get_ctx(r->main);

    /* an accepted key's only, like $keyauth_account_id */
    if (ctx == NULL || ctx->auth.verdict != KA_AUTH_OK) {
        v->not_found = 1;
        return NGX_OK;
    }

    d = ngx_http_keyauth_details(r->main, ctx);
    if (d == NULL) {
        v->not_found = 1;
        return NGX_OK;
    }

    switch (data) {
    case NGX_HTTP_KEYAUTH_VAR_PLAN_ID:
        s = &d->plan_id;
        break;
    case NGX_HTTP_KEYAUTH_VAR_KEY_NAME:
        s = &d->key_name;
        break;
    case NGX_HTTP_KEYAUTH_VAR_KEY_META:
        s = &d->key_meta;
        break;
    default: /* NGX_HTTP_KEYAUTH_VAR_ACCOUNT_META */
        s = &d->account_meta;
        break;
    }

    if (s->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->len = s->len;
    v->data = (u_char *) s->data;
    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    return NGX_OK;
}
