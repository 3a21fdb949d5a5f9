#include "ngx_http_keyauth_rate.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_shm.h"
#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_usage.h"


static ngx_int_t ngx_http_keyauth_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_keyauth_rate_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_keyauth_rate_headers(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx);
static ngx_int_t ngx_http_keyauth_rate_send(ngx_http_request_t *r,
    ngx_str_t *policy, ngx_str_t *now);
static u_char *ngx_http_keyauth_uint(u_char *p, uint64_t v);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;

static ngx_str_t  ngx_http_keyauth_policy_name = ngx_string("RateLimit-Policy");
static ngx_str_t  ngx_http_keyauth_ratelimit_name = ngx_string("RateLimit");
static ngx_str_t  ngx_http_keyauth_retry_after_name = ngx_string("Retry-After");


char *
ngx_http_keyauth_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    u_char     *colon;
    ssize_t     size;
    ngx_str_t  *value, name, s;

    if (kmcf->shm_zone) {
        return "is duplicate";
    }

    value = cf->args->elts;

    colon = (u_char *) ngx_strlchr(value[1].data, value[1].data + value[1].len,
                                   ':');
    if (colon == NULL || colon == value[1].data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone \"%V\" in \"keyauth_zone\", "
                           "expected NAME:SIZE", &value[1]);
        return NGX_CONF_ERROR;
    }

    name.data = value[1].data;
    name.len = colon - value[1].data;

    s.data = colon + 1;
    s.len = value[1].data + value[1].len - s.data;

    size = ngx_parse_size(&s);

    if (size == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid zone size \"%V\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small", &value[1]);
        return NGX_CONF_ERROR;
    }

    kmcf->shm_zone = ngx_shared_memory_add(cf, &name, size,
                                           &ngx_http_keyauth_module);
    if (kmcf->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    kmcf->shm_zone->init = ngx_http_keyauth_init_zone;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_keyauth_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t                    size, rate_size;
    ngx_slab_pool_t          *shpool;
    ngx_http_keyauth_zone_t  *zone;

    if (ngx_http_keyauth_zone_reused(shm_zone, data)) {
        /* reload with the same zone: the rate state carries on */
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

#ifdef MADV_HUGEPAGE
    /*
     * Huge pages for the slots, where the kernel gives them to shared memory
     * (transparent_hugepage/shmem_enabled "advise"): a request reads two
     * slots at random places in the zone, and each 4 KiB page it lands on
     * is a TLB miss. Asked before the tables are formatted (faulted in);
     * without them the zone works the same.
     */
    (void) madvise(shm_zone->shm.addr, shm_zone->shm.size, MADV_HUGEPAGE);
#endif

    size = sizeof(" in keyauth_zone \"\"") + shm_zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, size);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in keyauth_zone \"%V\"%Z",
                &shm_zone->shm.name);

    zone = ngx_slab_calloc(shpool, sizeof(ngx_http_keyauth_zone_t));
    if (zone == NULL) {
        return NGX_ERROR;
    }

    /* this edge's tag in keyauth_shared_limits' stream */
    zone->edge_id = ka_random_u64();

    /* then the pages still free, shared so that both tables hold as many
     * keys: a key's rate state and its usage slot */
    size = shpool->pfree * ngx_pagesize;
    rate_size = size / (KA_RATE_BYTES_PER_KEY + KA_USAGE_BYTES_PER_KEY)
                * KA_RATE_BYTES_PER_KEY;
    rate_size = ngx_align(rate_size, ngx_pagesize);

    zone->rate = ngx_slab_alloc(shpool, rate_size);
    if (zone->rate == NULL || !ka_rate_table_format(zone->rate, rate_size)) {
        return NGX_ERROR;
    }

    size = shpool->pfree * ngx_pagesize;

    zone->usage = ngx_slab_alloc(shpool, size);
    if (zone->usage == NULL || !ka_usage_table_format(zone->usage, size)) {
        return NGX_ERROR;
    }

    shpool->data = zone;
    shm_zone->data = zone;

    ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                  "keyauth_zone \"%V\": room for %uz keys' rate states "
                  "and usage counts of %uz keys", &shm_zone->shm.name,
                  ka_rate_table_slots(zone->rate),
                  ka_usage_table_slots(zone->usage));

    return NGX_OK;
}


ngx_int_t
ngx_http_keyauth_rate_refuse(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    u_char           *p;
    ngx_int_t         rc;
    ngx_str_t         code, message, value;
    ngx_table_elt_t  *h;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    value.data = p;
    value.len = ngx_sprintf(p, "%uL", ctx->rate.retry_after_s) - p;

    h = ngx_http_keyauth_add_header(r, &ngx_http_keyauth_retry_after_name,
                                    &value);
    if (h == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ngx_str_set(&code, "RATE_LIMITED");
    ngx_str_set(&message, "This API key is over its rate limit; "
                          "retry after the Retry-After delay");

    rc = ngx_http_keyauth_send_error(r, NGX_HTTP_TOO_MANY_REQUESTS, &code,
                                     &message);
    ngx_http_finalize_request(r, rc);

    return NGX_DONE;
}


/* The per-key policy alone, hand-formatted: the common case. */
static ngx_int_t
ngx_http_keyauth_rate_headers(ngx_http_request_t *r,
    ngx_http_keyauth_ctx_t *ctx)
{
    u_char     *p;
    ngx_str_t   policy, now;

    p = ngx_pnalloc(r->pool, 2 * (sizeof("\"per-key\";q=;w=60") + NGX_INT64_LEN
                                  + NGX_INT32_LEN));
    if (p == NULL) {
        return NGX_ERROR;
    }

    policy.data = p;
    p = ngx_cpymem(p, "\"per-key\";q=", sizeof("\"per-key\";q=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.limit);
    p = ngx_cpymem(p, ";w=60", sizeof(";w=60") - 1);
    policy.len = p - policy.data;

    now.data = p;
    p = ngx_cpymem(p, "\"per-key\";r=", sizeof("\"per-key\";r=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.remaining);
    p = ngx_cpymem(p, ";t=", sizeof(";t=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.reset_s);
    now.len = p - now.data;

    return ngx_http_keyauth_rate_send(r, &policy, &now);
}


/* Both headers, then the next filter. */
static ngx_int_t
ngx_http_keyauth_rate_send(ngx_http_request_t *r, ngx_str_t *policy,
    ngx_str_t *now)
{
    if (ngx_http_keyauth_add_header(r, &ngx_http_keyauth_policy_name, policy)
        == NULL
        || ngx_http_keyauth_add_header(r, &ngx_http_keyauth_ratelimit_name,
                                       now)
           == NULL)
    {
        return NGX_ERROR;
    }

    return ngx_http_next_header_filter(r);
}


/* One policy of the RateLimit headers: its name, quota, window (0: none),
 * what remains and when it is all back (-1: never). */
typedef struct {
    ngx_str_t    name;
    uint64_t     quota;
    int64_t      window;
    int64_t      remaining;
    int64_t      reset;
    uint64_t     per_call;    /* units a call takes: for "nearest" */
} ngx_http_keyauth_policy_t;


static ngx_int_t
ngx_http_keyauth_rate_header_filter(ngx_http_request_t *r)
{
    u_char                        *p;
    int64_t                        left;
    ngx_str_t                      value, now;
    ngx_uint_t                     i, n, nearest;
    ka_quota_policy_t             *q;
    ngx_http_keyauth_ctx_t        *ctx;
    ngx_http_keyauth_policy_t      pol[3];
    ngx_http_keyauth_main_conf_t  *kmcf;

    ctx = ngx_http_keyauth_get_ctx(r);

    if (ctx == NULL || r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    /* an X-Accel-Redirect whose new location ran no access phase (its
     * `return` answered first): the units of the answer that redirected */
    ngx_http_keyauth_quota_settle_redirect(r, ctx);

    if (ctx->quota_pending) {
        ngx_http_keyauth_quota_settle(r, ctx);
    }

    if (ctx->strip_header) {
        ngx_http_keyauth_quota_strip(r, ctx);
    }

    if (!(ctx->rate_checked || ctx->quota_checked)) {
        return ngx_http_next_header_filter(r);
    }

    if (!ctx->quota_checked) {
        /* the rate alone: this runs on every keyed request */
        return ngx_http_keyauth_rate_headers(r, ctx);
    }

    /* every response of a checked key, 429 included: each policy in force
     * in RateLimit-Policy, the one nearest exhaustion in RateLimit;
     * hand-formatted since this runs on every keyed request */

    n = 0;
    kmcf = ngx_http_get_module_main_conf(r, ngx_http_keyauth_module);

    if (ctx->rate_checked) {
        ngx_str_set(&pol[n].name, "per-key");
        pol[n].quota = ctx->rate.limit;
        pol[n].window = 60;
        pol[n].remaining = ctx->rate.remaining;
        pol[n].reset = (int64_t) ctx->rate.reset_s;
        pol[n].per_call = 1;
        n++;

    } else if (kmcf->shm_zone) {
        /* refused by its quota before the rate was looked at: the rate is
         * still in force, its state unknown, so never the nearest */
        ngx_str_set(&pol[n].name, "per-key");
        pol[n].quota = ngx_min(ctx->auth.requested_rpm,
                               ctx->auth.entitlement_rpm);
        pol[n].window = 60;
        pol[n].remaining = NGX_MAX_INT32_VALUE;
        pol[n].reset = 0;
        pol[n].per_call = 1;
        n++;
    }

    for (i = 0; ctx->quota_checked && i < 2; i++) {
        q = &ctx->quota.policy[i];

        if (q->period == KA_QUOTA_NONE) {
            continue;
        }

        left = (int64_t) q->units - (int64_t) q->used;

        if (i == KA_QUOTA_KEY) {
            ngx_str_set(&pol[n].name, "key-quota");
        } else {
            ngx_str_set(&pol[n].name, "account-quota");
        }

        pol[n].quota = q->units;
        pol[n].window = q->window_s;
        pol[n].remaining = left > 0 ? left : 0;
        pol[n].reset = q->reset_s;
        pol[n].per_call = ctx->cost_header || ctx->cost == 0 ? 1 : ctx->cost;
        n++;
    }

    if (n == 0) {
        return ngx_http_next_header_filter(r);
    }

    p = ngx_pnalloc(r->pool, 4 * n * (sizeof("\"account-quota\";q=;w=, ")
                                      + 2 * NGX_INT64_LEN));
    if (p == NULL) {
        return NGX_ERROR;
    }

    value.data = p;
    nearest = 0;

    for (i = 0; i < n; i++) {
        if (i) {
            *p++ = ',';
            *p++ = ' ';
        }

        *p++ = '"';
        p = ngx_cpymem(p, pol[i].name.data, pol[i].name.len);
        p = ngx_cpymem(p, "\";q=", sizeof("\";q=") - 1);
        p = ngx_http_keyauth_uint(p, pol[i].quota);

        if (pol[i].window > 0) {
            p = ngx_cpymem(p, ";w=", sizeof(";w=") - 1);
            p = ngx_http_keyauth_uint(p, (uint64_t) pol[i].window);
        }

        /* the fewest calls left at its cost a call */
        if (pol[i].remaining / (int64_t) pol[i].per_call
            < pol[nearest].remaining / (int64_t) pol[nearest].per_call)
        {
            nearest = i;
        }
    }

    value.len = p - value.data;

    now.data = p;
    *p++ = '"';
    p = ngx_cpymem(p, pol[nearest].name.data, pol[nearest].name.len);
    p = ngx_cpymem(p, "\";r=", sizeof("\";r=") - 1);
    p = ngx_http_keyauth_uint(p, (uint64_t) pol[nearest].remaining);

    if (pol[nearest].reset >= 0) {
        p = ngx_cpymem(p, ";t=", sizeof(";t=") - 1);
        p = ngx_http_keyauth_uint(p, (uint64_t) pol[nearest].reset);
    }

    now.len = p - now.data;

    return ngx_http_keyauth_rate_send(r, &value, &now);
}


static u_char *
ngx_http_keyauth_uint(u_char *p, uint64_t v)
{
    u_char   buf[NGX_INT64_LEN];
    u_char  *d;

    d = buf + sizeof(buf);

    do {
        *--d = (u_char) ('0' + v % 10);
        v /= 10;
    } while (v);

    return ngx_cpymem(p, d, buf + sizeof(buf) - d);
}


ngx_int_t
ngx_http_keyauth_rate_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_keyauth_rate_header_filter;

    return NGX_OK;
}
