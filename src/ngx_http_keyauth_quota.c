#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_quota_ledger.h"
#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_usage.h"


/* a bad reported cost, or a quota gone uncounted, is logged at most this
 * often */
#define NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC    60000


static ngx_http_keyauth_outcome_e ngx_http_keyauth_quota_exceeded(
    ngx_http_request_t *r, ngx_http_keyauth_main_conf_t *kmcf,
    ngx_http_keyauth_ctx_t *ctx);
static ngx_str_t *ngx_http_keyauth_find_header(ngx_list_t *headers,
    ngx_str_t *name, ngx_uint_t remove);
static int64_t ngx_http_keyauth_parse_units(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx, ngx_str_t *found);


static ngx_msec_t                     ngx_http_keyauth_cost_next_log;
static ngx_msec_t                     ngx_http_keyauth_unmetered_next_log;

static ngx_str_t  ngx_http_keyauth_retry_after = ngx_string("Retry-After");


char *
ngx_http_keyauth_cost(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_loc_conf_t  *klcf = conf;

    ngx_int_t   n;
    ngx_str_t  *value;

    if (klcf->cost != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;
    n = ngx_atoi(value[1].data, value[1].len);

    if (n == NGX_ERROR || n > KA_QUOTA_MAX_COST) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_cost\" \"%V\": expected units "
                           "from 0 to %d", &value[1], KA_QUOTA_MAX_COST);
        return NGX_CONF_ERROR;
    }

    klcf->cost = n;

    return NGX_CONF_OK;
}


char *
ngx_http_keyauth_cost_header(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_loc_conf_t  *klcf = conf;

    u_char       c;
    ngx_str_t   *value;
    ngx_uint_t   i;

    if (klcf->cost_header.data != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;

    for (i = 0; i < value[1].len; i++) {
        c = ngx_tolower(value[1].data[i]);

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
              || c == '_'))
        {
            break;
        }
    }

    if (value[1].len == 0 || value[1].len > 64 || i != value[1].len) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_cost_header\" \"%V\": expected "
                           "a header name of letters, digits, '-' and '_'",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    klcf->cost_header = value[1];

    return NGX_CONF_OK;
}


ngx_http_keyauth_outcome_e
ngx_http_keyauth_quota_check(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx,
    int64_t now_ms)
{
    uint64_t  need;

    /* a metered call reserves its location's cost, at least a unit, until
     * its upstream says what it used: the calls in flight never hold more
     * than the quota has */
    need = ctx->cost_header ? ngx_max(ctx->cost, 1) : ctx->cost;

    ka_quota_check(ngx_http_keyauth_quota_ledger(), &ctx->auth, need, now_ms,
                   &ctx->quota);

    if (ctx->quota.unmetered
        && (ngx_msec_int_t) (ngx_current_msec
                             - ngx_http_keyauth_unmetered_next_log) >= 0)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "keyauth: the quota ledger has no room and cannot "
                      "grow: a quota goes uncounted rather than refuse the "
                      "call (keyauth_status "
                      "keyauth_quota_ledger_no_room_total; logged once a "
                      "minute)");
        ngx_http_keyauth_unmetered_next_log = ngx_current_msec
                                              + NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC;
    }

    switch (ctx->quota.verdict) {

    case KA_QUOTA_FREE:
        return NGX_HTTP_KEYAUTH_OK;

    case KA_QUOTA_ADMIT:
        ctx->quota_checked = 1;
        return NGX_HTTP_KEYAUTH_OK;

    case KA_QUOTA_EXCEEDED:
        ctx->quota_checked = 1;
        return ngx_http_keyauth_quota_exceeded(r, kmcf, ctx);

    default: /* KA_QUOTA_UNAVAILABLE */
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "keyauth: %s; refused with 503", ctx->quota.reason);
        return NGX_HTTP_KEYAUTH_UNAVAILABLE;
    }
}


ngx_http_keyauth_outcome_e
ngx_http_keyauth_quota_charge(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx,
    int64_t now_ms)
{
    uint64_t  cost;

    /* a metered call: its reservation now, settled when the answer's
     * header arrives (which is stripped whether or not a quota applies) */
    cost = ctx->cost_header ? ngx_max(ctx->cost, 1) : ctx->cost;

    if (ctx->quota_checked
        && !ka_quota_charge(ngx_http_keyauth_quota_ledger(), &ctx->auth,
                            &ctx->quota, cost, 1, now_ms))
    {
        return ngx_http_keyauth_quota_exceeded(r, kmcf, ctx);
    }

    if (ctx->cost_header) {
        ctx->reserved = cost;
        ctx->quota_pending = 1;
        return NGX_HTTP_KEYAUTH_OK;
    }

    if (ctx->quota_checked) {
        ngx_http_keyauth_count_units(kmcf, cost);
    }

    return NGX_HTTP_KEYAUTH_OK;
}


/* A call its quota refuses: counted in usage (charged nothing) and logged. */
static ngx_http_keyauth_outcome_e
ngx_http_keyauth_quota_exceeded(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx)
{
    char         id[KA_ID_TEXT_LEN];
    ngx_time_t  *tp;

    tp = ngx_timeofday();
    ngx_http_keyauth_usage_count(r, kmcf, ctx, KA_USAGE_QUOTA_EXCEEDED, 0,
                                 (int64_t) tp->sec * 1000 + tp->msec,
                                 ngx_http_keyauth_now_ns());

    if (r->connection->log->log_level >= NGX_LOG_INFO) {
        if (ctx->quota.refused == KA_QUOTA_KEY) {
            ka_format_key_id(ctx->auth.key_id_bin, id);
        } else {
            ka_format_account_id(ctx->auth.account_id_bin, id);
        }

        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "keyauth: %*s has used its quota of %uL units",
                      (size_t) KA_ID_TEXT_LEN, id,
                      ctx->quota.policy[ctx->quota.refused].units);
    }

    return NGX_HTTP_KEYAUTH_QUOTA_EXCEEDED;
}


int64_t
ngx_http_keyauth_quota_retry(ngx_http_keyauth_ctx_t *ctx)
{
    int64_t             retry, left;
    ngx_uint_t          i;
    ka_quota_policy_t  *q;

    retry = 0;

    for (i = 0; i < 2; i++) {
        q = &ctx->quota.policy[i];
        left = (int64_t) q->units - (int64_t) q->used;

        if (q->period == KA_QUOTA_NONE
            || (left > 0 && (uint64_t) left >= (ctx->cost_header
                                                ? ngx_max(ctx->cost, 1)
                                                : ctx->cost)))
        {
            continue;
        }

        if (q->reset_s < 0) {
            return -1;
        }

        retry = ngx_max(retry, q->reset_s);
    }

    return retry;
}


ngx_int_t
ngx_http_keyauth_quota_refuse(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    u_char     *p;
    int64_t     retry;
    ngx_int_t   rc;
    ngx_str_t   code, message, value;

    retry = ngx_http_keyauth_quota_retry(ctx);

    if (retry > 0) {
        p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
        if (p == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        value.data = p;
        value.len = ngx_sprintf(p, "%L", retry) - p;

        if (ngx_http_keyauth_add_header(r, &ngx_http_keyauth_retry_after,
                                        &value)
            == NULL)
        {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
    }

    ngx_str_set(&code, "QUOTA_EXCEEDED");

    if (retry < 0) {
        ngx_str_set(&message, "This API key has used all of its units; "
                              "they do not refill");
    } else if (ctx->quota.refused == KA_QUOTA_KEY) {
        ngx_str_set(&message, "This API key has used its quota for the "
                              "period; retry after the Retry-After delay");
    } else {
        ngx_str_set(&message, "The account of this API key has used its "
                              "quota for the period; retry after the "
                              "Retry-After delay");
    }

    rc = ngx_http_keyauth_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS, &code,
                                     &message);
    ngx_http_finalize_request(r, rc);

    return NGX_DONE;
}


/* The first value of the headers named `name` in a list (an answer's, or
 * an upstream's), NULL if there is none; with `remove`, every one of them
 * is taken out of the list. */
static ngx_str_t *
ngx_http_keyauth_find_header(ngx_list_t *headers, ngx_str_t *name,
    ngx_uint_t remove)
{
    ngx_str_t        *found;
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    found = NULL;
    part = &headers->part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].hash == 0 || h[i].key.len != name->len
            || ngx_strncasecmp(h[i].key.data, name->data, name->len) != 0)
        {
            continue;
        }

        if (found == NULL) {
            found = &h[i].value;
        }

        if (!remove) {
            break;
        }

        h[i].hash = 0;
    }

    return found;
}


void
ngx_http_keyauth_quota_redirected(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    ngx_http_keyauth_loc_conf_t  *klcf;

    klcf = ngx_http_get_module_loc_conf(r, ngx_http_keyauth_module);

    if (klcf->cost_header.len) {
        ctx->strip_header = &klcf->cost_header;
    }
}


void
ngx_http_keyauth_quota_strip(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    (void) ngx_http_keyauth_find_header(&r->headers_out.headers,
                                        ctx->strip_header, 1);
    ctx->strip_header = NULL;
}


/* A metered call's units, once known: counted in usage, and the call's
 * reservation settled with them in the quotas it was admitted under. */
static void
ngx_http_keyauth_quota_charge_units(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx, int64_t cost)
{
    int64_t                        now_ms;
    ngx_time_t                    *tp;
    ngx_http_keyauth_main_conf_t  *kmcf;

    ctx->quota_pending = 0;

    tp = ngx_timeofday();
    now_ms = (int64_t) tp->sec * 1000 + tp->msec;
    kmcf = ngx_http_get_module_main_conf(r, ngx_http_keyauth_module);

    /* the call was counted when it was admitted: now its units */
    if (cost > 0) {
        ngx_http_keyauth_usage_count(r, kmcf, ctx, KA_USAGE_UNITS_ONLY,
                                     (uint64_t) cost, now_ms,
                                     ngx_http_keyauth_now_ns());
    }

    if (!ctx->quota_checked || ctx->quota.verdict != KA_QUOTA_ADMIT) {
        return;
    }

    /* the balance may go below zero: the next call waits for the period */
    ka_quota_settle(ngx_http_keyauth_quota_ledger(), &ctx->auth, &ctx->quota,
                    ctx->reserved, (uint64_t) cost, now_ms);

    ngx_http_keyauth_count_units(kmcf, (uint64_t) cost);
}


ngx_int_t
ngx_http_keyauth_quota_log(ngx_http_request_t *r)
{
    ngx_http_keyauth_ctx_t  *ctx;

    ctx = ngx_http_keyauth_get_ctx(r);

    /* admitted, but no answer's header ever came (the client went away
     * first): the location's keyauth_cost, so that hanging up is no way
     * to call for free */
    if (ctx != NULL && ctx->quota_pending) {
        ngx_http_keyauth_quota_charge_units(r, ctx, (int64_t) ctx->cost);
    }

    return NGX_OK;
}


/* The units a found cost header says, or the location's keyauth_cost when
 * it is missing or malformed (said in the error log once a minute). */
static int64_t
ngx_http_keyauth_parse_units(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx, ngx_str_t *found)
{
    int64_t  cost;

    cost = found ? ka_quota_parse_cost((const char *) found->data, found->len)
                 : -1;

    if (cost >= 0) {
        return cost;
    }

    cost = (int64_t) ctx->cost;

    if ((ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_cost_next_log)
        >= 0)
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth: the upstream's answer has %s \"%V\" "
                      "(expected units from 0 to %d); charged "
                      "keyauth_cost %L (logged once a minute)",
                      found ? "a malformed" : "no", ctx->cost_header,
                      KA_QUOTA_MAX_COST, cost);
        ngx_http_keyauth_cost_next_log = ngx_current_msec
                                         + NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC;
    }

    return cost;
}


void
ngx_http_keyauth_quota_settle(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    ngx_str_t  *found;

    /* the first of the header's values counts; none reaches the client */
    found = ngx_http_keyauth_find_header(&r->headers_out.headers,
                                         ctx->cost_header, 1);

    ngx_http_keyauth_quota_charge_units(r, ctx,
                                        ngx_http_keyauth_parse_units(r, ctx,
                                                                     found));
}


void
ngx_http_keyauth_quota_settle_redirect(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    ngx_str_t  *found;

    if (!ctx->quota_pending || r->upstream == NULL
        || r->upstream->headers_in.x_accel_redirect == NULL)
    {
        return;
    }

    /* the units the admitting location's upstream reported, in the answer
     * that redirected; whatever answers now may name the header too, and
     * it is stripped, never charged */
    found = ngx_http_keyauth_find_header(&r->upstream->headers_in.headers,
                                         ctx->cost_header, 0);

    ngx_http_keyauth_quota_charge_units(r, ctx,
                                        ngx_http_keyauth_parse_units(r, ctx,
                                                                     found));
    ctx->strip_header = ctx->cost_header;
}


ngx_int_t
ngx_http_keyauth_quota_remaining(ngx_http_keyauth_ctx_t *ctx,
    int64_t *remaining)
{
    int64_t             left;
    ngx_uint_t          i, any;
    ka_quota_policy_t  *q;

    any = 0;

    for (i = 0; ctx->quota_checked && i < 2; i++) {
        q = &ctx->quota.policy[i];

        if (q->period == KA_QUOTA_NONE) {
            continue;
        }

        left = (int64_t) q->units - (int64_t) q->used;

        if (!any || left < *remaining) {
            *remaining = left;
        }

        any = 1;
    }

    return any;
}
