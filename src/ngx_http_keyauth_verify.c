#include "ngx_http_keyauth_verify.h"
#include "ngx_http_keyauth_decide.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_store.h"
#include "ngx_http_keyauth_variables.h"


static void ngx_http_keyauth_verify_body(ngx_http_request_t *r);
static ngx_int_t ngx_http_keyauth_verify_check(ngx_http_request_t *r,
    u_char *body, size_t len);
static ngx_int_t ngx_http_keyauth_verify_valid(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx, int64_t now_ms);
static ngx_int_t ngx_http_keyauth_verify_refused(ngx_http_request_t *r,
    ngx_str_t *code, int64_t retry_after);
static ngx_int_t ngx_http_keyauth_verify_invalid(ngx_http_request_t *r,
    const char *field, const char *message);


/* The core's refusals, by verdict (keyauth_core.h's order): the
 * keyauth_status counter and the code the answer gives, the edge's. */
typedef struct {
    ngx_http_keyauth_outcome_e  outcome;
    ngx_str_t                   code;
} ngx_http_keyauth_verify_refusal_t;

static ngx_http_keyauth_verify_refusal_t  ngx_http_keyauth_verify_refusals[] = {
    /* KA_AUTH_OK: decided further */
    { NGX_HTTP_KEYAUTH_OK, ngx_null_string },
    /* KA_AUTH_KEY_REQUIRED: an empty key, which the parser refuses */
    { NGX_HTTP_KEYAUTH_KEY_INVALID, ngx_string("INVALID_API_KEY") },
    /* KA_AUTH_KEY_INVALID */
    { NGX_HTTP_KEYAUTH_KEY_INVALID, ngx_string("INVALID_API_KEY") },
    /* KA_AUTH_SCOPE_MISSING */
    { NGX_HTTP_KEYAUTH_SCOPE_MISSING, ngx_string("INSUFFICIENT_SCOPE") },
    /* KA_AUTH_UNAVAILABLE: 503 */
    { NGX_HTTP_KEYAUTH_UNAVAILABLE, ngx_null_string },
    /* KA_AUTH_ACCOUNT_SUSPENDED */
    { NGX_HTTP_KEYAUTH_ACCOUNT_SUSPENDED, ngx_string("ACCOUNT_SUSPENDED") },
    /* KA_AUTH_IP_NOT_ALLOWED */
    { NGX_HTTP_KEYAUTH_IP_NOT_ALLOWED, ngx_string("IP_NOT_ALLOWED") },
};


ngx_int_t
ngx_http_keyauth_verify_handler(ngx_http_request_t *r)
{
    ngx_int_t  rc;
    ngx_str_t  allow, message;

    if (!(r->method & NGX_HTTP_POST)) {
        ngx_str_set(&allow, "POST");
        ngx_str_set(&message, "The verify API is called with POST");
        return ngx_http_keyauth_not_allowed(r, &allow, &message);
    }

    /* refused unread; a chunked body is measured once read, which
     * client_max_body_size bounds */
    if (r->headers_in.content_length_n > KA_VERIFY_MAX_BODY) {
        return ngx_http_keyauth_verify_invalid(r, "body",
                                               "is over 65536 bytes");
    }

    r->request_body_in_single_buf = 1;

    rc = ngx_http_read_client_request_body(r, ngx_http_keyauth_verify_body);
    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


void
ngx_http_keyauth_verify_merge(ngx_http_core_loc_conf_t *clcf)
{
    if (clcf->handler == ngx_http_keyauth_verify_handler
        && clcf->client_body_buffer_size < KA_VERIFY_MAX_BODY)
    {
        clcf->client_body_buffer_size = KA_VERIFY_MAX_BODY;
    }
}


/* The body read: in memory, in one buffer (or a few, joined), since the
 * location's buffer holds KA_VERIFY_MAX_BODY; a body that went to a
 * temporary file was longer than that, and is refused unread. */
static void
ngx_http_keyauth_verify_body(ngx_http_request_t *r)
{
    u_char       *p, *body;
    off_t         len;
    ngx_chain_t  *cl, *bufs;

    bufs = r->request_body ? r->request_body->bufs : NULL;
    len = 0;

    for (cl = bufs; cl; cl = cl->next) {
        len += ngx_buf_size(cl->buf);
    }

    if (len > KA_VERIFY_MAX_BODY
        || (r->request_body && r->request_body->temp_file))
    {
        ngx_http_finalize_request(r,
            ngx_http_keyauth_verify_invalid(r, "body", "is over 65536 bytes"));
        return;
    }

    if (bufs == NULL || bufs->next == NULL) {
        body = bufs ? bufs->buf->pos : NULL;

    } else {
        body = ngx_pnalloc(r->pool, (size_t) len);
        if (body == NULL) {
            ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
            return;
        }

        p = body;

        for (cl = bufs; cl; cl = cl->next) {
            p = ngx_cpymem(p, cl->buf->pos, cl->buf->last - cl->buf->pos);
        }
    }

    ngx_http_finalize_request(r,
        ngx_http_keyauth_verify_check(r, body, (size_t) len));
}


static ngx_int_t
ngx_http_keyauth_verify_check(ngx_http_request_t *r, u_char *body,
    size_t len)
{
    int64_t                        now_ms;
    ngx_str_t                      code;
    ngx_time_t                    *tp;
    ka_verify_request_t            req;
    ngx_http_keyauth_ctx_t         call, *ctx;
    ngx_http_keyauth_outcome_e     outcome;
    ngx_http_keyauth_main_conf_t  *kmcf;

    ngx_http_keyauth_verify_refusal_t  *refusal;

    if (!ka_verify_parse((const char *) body, len, &req)) {
        return ngx_http_keyauth_verify_invalid(r, req.field, req.error);
    }

    kmcf = ngx_http_get_module_main_conf(r, ngx_http_keyauth_module);

    /* the access phase's context, of this call alone: never the request's
     * (its RateLimit headers and metered charge would be the checked
     * key's, not this answer's) */
    ctx = &call;
    ngx_memzero(ctx, sizeof(ngx_http_keyauth_ctx_t));

    ctx->cost = req.cost;
    ctx->cost_header = NULL;

    tp = ngx_timeofday();
    now_ms = (int64_t) tp->sec * 1000 + tp->msec;

    ka_edge_check_key(ngx_http_keyauth_edge(r->connection->log),
                      req.key.data, req.key.len, req.client,
                      req.scopes, req.n_scopes, now_ms, &ctx->auth);

    if (ctx->auth.log_level != KA_LOG_NONE) {
        ngx_http_keyauth_log_auth(r, &ctx->auth);
    }

    switch (ctx->auth.verdict) {

    case KA_AUTH_OK:
        outcome = ngx_http_keyauth_decide(r, kmcf, ctx);

        if (outcome == NGX_HTTP_KEYAUTH_OK) {
            return ngx_http_keyauth_verify_valid(r, ctx, now_ms);
        }

        if (outcome == NGX_HTTP_KEYAUTH_RATE_LIMITED) {
            ngx_str_set(&code, "RATE_LIMITED");
            return ngx_http_keyauth_verify_refused(r, &code,
                                           (int64_t) ctx->rate.retry_after_s);
        }

        if (outcome == NGX_HTTP_KEYAUTH_QUOTA_EXCEEDED) {
            ngx_str_set(&code, "QUOTA_EXCEEDED");
            return ngx_http_keyauth_verify_refused(r, &code,
                                          ngx_http_keyauth_quota_retry(ctx));
        }

        break;  /* unavailable: counted, logged */

    default:
        refusal = (ngx_uint_t) ctx->auth.verdict
                  < sizeof(ngx_http_keyauth_verify_refusals)
                    / sizeof(ngx_http_keyauth_verify_refusals[0])
                  ? &ngx_http_keyauth_verify_refusals[ctx->auth.verdict]
                  : NULL;

        if (refusal && refusal->code.len) {
            ngx_http_keyauth_count(kmcf, refusal->outcome);
            return ngx_http_keyauth_verify_refused(r, &refusal->code, 0);
        }

        /* KA_AUTH_UNAVAILABLE, or a verdict this glue does not know */
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_UNAVAILABLE);
        break;
    }

    /* no decision: the store or the ledger failed (logged), fail closed */
    ngx_str_set(&code, "AUTH_UNAVAILABLE");
    {
        ngx_str_t  message = ngx_string("API key authentication is "
                                        "temporarily unavailable");

        return ngx_http_keyauth_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           &code, &message);
    }
}


/* A JSON string of s, or null when there is none. */
static u_char *
ngx_http_keyauth_verify_text(u_char *p, ka_str_t *s)
{
    if (s == NULL || s->len == 0) {
        return ngx_cpymem(p, "null", 4);
    }

    *p++ = '"';
    p = (u_char *) ngx_escape_json(p, (u_char *) s->data, s->len);
    *p++ = '"';

    return p;
}


/* A meta object as stored (compact JSON), or null when there is none. */
static u_char *
ngx_http_keyauth_verify_raw(u_char *p, ka_str_t *s)
{
    if (s == NULL || s->len == 0) {
        return ngx_cpymem(p, "null", 4);
    }

    return ngx_cpymem(p, s->data, s->len);
}


/*
 * {"valid":true, ...}: the key's ids, plan, name and scopes, its meta and
 * its account's (null when none), its rate after this check (null without
 * keyauth_zone) and the quota nearest exhaustion (null when none is in
 * force). The scopes are views into the check's snapshot: rendered before
 * the details are read, which may take a newer one.
 */
static ngx_int_t
ngx_http_keyauth_verify_valid(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx, int64_t now_ms)
{
    u_char             *p, *scopes;
    size_t              scopes_len, len;
    ka_key_details_t   *d;
    int64_t             left, best_left, best_reset;
    ngx_str_t           body;
    ngx_tm_t            tm;
    ngx_uint_t          i, any;
    ka_quota_policy_t  *q;
    char                key_id[KA_ID_TEXT_LEN], account_id[KA_ID_TEXT_LEN];

    ka_format_key_id(ctx->auth.key_id_bin, key_id);
    ka_format_account_id(ctx->auth.account_id_bin, account_id);

    scopes_len = ka_auth_scopes_json(&ctx->auth, NULL, 0);

    scopes = ngx_pnalloc(r->pool, scopes_len);
    if (scopes == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    (void) ka_auth_scopes_json(&ctx->auth, (char *) scopes, scopes_len);

    d = ngx_http_keyauth_details(r, ctx);

    /* JSON-escaped texts take at most 6 bytes a byte; the metas are JSON */
    len = 512 + scopes_len;

    if (d != NULL) {
        len += 6 * (d->plan_id.len + d->key_name.len)
               + d->key_meta.len + d->account_meta.len;
    }

    body.data = ngx_pnalloc(r->pool, len);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(body.data, "{\"valid\":true,\"keyId\":\"%*s\","
                    "\"accountId\":\"%*s\",\"planId\":",
                    (size_t) KA_ID_TEXT_LEN, key_id,
                    (size_t) KA_ID_TEXT_LEN, account_id);
    p = ngx_http_keyauth_verify_text(p, d ? &d->plan_id : NULL);
    p = ngx_cpymem(p, ",\"name\":", sizeof(",\"name\":") - 1);
    p = ngx_http_keyauth_verify_text(p, d ? &d->key_name : NULL);
    p = ngx_cpymem(p, ",\"scopes\":", sizeof(",\"scopes\":") - 1);
    p = ngx_cpymem(p, scopes, scopes_len);
    p = ngx_cpymem(p, ",\"meta\":", sizeof(",\"meta\":") - 1);
    p = ngx_http_keyauth_verify_raw(p, d ? &d->key_meta : NULL);
    p = ngx_cpymem(p, ",\"accountMeta\":", sizeof(",\"accountMeta\":") - 1);
    p = ngx_http_keyauth_verify_raw(p, d ? &d->account_meta : NULL);
    p = ngx_cpymem(p, ",\"ratelimit\":", sizeof(",\"ratelimit\":") - 1);

    if (ctx->rate_checked) {
        p = ngx_sprintf(p, "{\"limit\":%uD,\"remaining\":%uD,"
                        "\"resetSeconds\":%uL}",
                        ctx->rate.limit, ctx->rate.remaining,
                        ctx->rate.reset_s);
    } else {
        p = ngx_cpymem(p, "null", 4);
    }

    /* the quota in force nearest exhaustion, a free call's too */
    any = 0;
    best_left = 0;
    best_reset = -1;

    for (i = 0; i < 2; i++) {
        q = &ctx->quota.policy[i];

        if (q->period == KA_QUOTA_NONE) {
            continue;
        }

        left = (int64_t) q->units - (int64_t) q->used;

        if (!any || left < best_left) {
            best_left = left;
            best_reset = q->reset_s;
        }

        any = 1;
    }

    if (!any) {
        p = ngx_cpymem(p, ",\"quota\":null}\n", sizeof(",\"quota\":null}\n") - 1);

    } else {
        p = ngx_sprintf(p, ",\"quota\":{\"remaining\":%L,\"resetsAt\":",
                        ngx_max(best_left, 0));

        if (best_reset < 0) {
            p = ngx_cpymem(p, "null", 4);   /* total credits: no reset */

        } else {
            ngx_gmtime(now_ms / 1000 + best_reset, &tm);
            p = ngx_sprintf(p, "\"%4d-%02d-%02dT%02d:%02d:%02d.000Z\"",
                            tm.ngx_tm_year, tm.ngx_tm_mon, tm.ngx_tm_mday,
                            tm.ngx_tm_hour, tm.ngx_tm_min, tm.ngx_tm_sec);
        }

        p = ngx_cpymem(p, "}}\n", 3);
    }

    body.len = p - body.data;

    return ngx_http_keyauth_send_json(r, NGX_HTTP_OK, &body);
}


/* {"valid":false,"code":...}, with retryAfterSeconds when it is known. */
static ngx_int_t
ngx_http_keyauth_verify_refused(ngx_http_request_t *r, ngx_str_t *code,
    int64_t retry_after)
{
    ngx_str_t  body;

    body.data = ngx_pnalloc(r->pool, 96 + code->len);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (retry_after > 0) {
        body.len = ngx_sprintf(body.data, "{\"valid\":false,\"code\":\"%V\","
                               "\"retryAfterSeconds\":%L}\n",
                               code, retry_after)
                   - body.data;
    } else {
        body.len = ngx_sprintf(body.data, "{\"valid\":false,\"code\":\"%V\"}\n",
                               code)
                   - body.data;
    }

    return ngx_http_keyauth_send_json(r, NGX_HTTP_OK, &body);
}


static ngx_int_t
ngx_http_keyauth_verify_invalid(ngx_http_request_t *r, const char *field,
    const char *message)
{
    size_t     n;
    ngx_str_t  code, text, name;

    ngx_str_set(&code, "VALIDATION_ERROR");

    /* the parser's own text, "FIELD why": ASCII without quotes or
     * backslashes, copied since it lives on the caller's stack */
    n = ngx_strlen(field);
    text.len = n + 1 + ngx_strlen(message);
    text.data = ngx_pnalloc(r->pool, text.len);

    if (text.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_sprintf(text.data, "%s %s", field, message);

    name.data = text.data;
    name.len = n;

    return ngx_http_keyauth_send_field_error(r, NGX_HTTP_BAD_REQUEST, &code,
                                             &text, &name);
}
