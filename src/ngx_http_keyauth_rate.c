#include "ngx_http_keyauth_rate.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_shm.h"


static ngx_int_t ngx_http_keyauth_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_keyauth_rate_header_filter(ngx_http_request_t *r);
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
ngx_http_keyauth_rate_limit(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx)
{
    u_char                   *p;
    char                      key_id[KA_ID_TEXT_LEN];
    int64_t                   now_ms;
    uint64_t                  now_ns;
    ngx_int_t                 rc;
    ngx_str_t                 code, message, value;
    ka_lock_t                 lock;
    ngx_time_t               *tp;
    ngx_table_elt_t          *h;
    ngx_http_keyauth_zone_t  *zone;

    if (kmcf->shm_zone == NULL) {
        return NGX_OK;
    }

    ngx_http_keyauth_zone_lock(kmcf->shm_zone, &lock);

    zone = kmcf->shm_zone->data;
    now_ns = ka_monotonic_ns();

    ka_rate_check(zone->rate, &ctx->auth, now_ns, kmcf->shared != NULL, &lock,
                  &ctx->rate);
    ctx->rate_checked = 1;

    /* usage is counted where the decision is made; collected elsewhere */
    tp = ngx_timeofday();
    now_ms = (int64_t) tp->sec * 1000 + tp->msec;

    if (ka_usage_count(zone->usage, &ctx->auth, ctx->rate.allowed, now_ms,
                       now_ns, &lock))
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth_zone \"%V\" has no room for the usage of "
                      "more keys: requests go uncounted (keyauth_status "
                      "keyauth_usage_dropped_total); make the zone larger",
                      &kmcf->shm_zone->shm.name);
    }

    if (ctx->rate.warn_full) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth_zone \"%V\" is full: the rate state of a "
                      "busy key was reused; make the zone larger",
                      &kmcf->shm_zone->shm.name);
    }

    if (ctx->rate.allowed) {
        return NGX_OK;
    }

    if (r->connection->log->log_level >= NGX_LOG_INFO) {
        ka_format_key_id(ctx->auth.key_id_bin, key_id);
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "keyauth: API key %*s is over its rate of %uD/min",
                      (size_t) KA_ID_TEXT_LEN, key_id, ctx->rate.limit);
    }

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


static ngx_int_t
ngx_http_keyauth_rate_header_filter(ngx_http_request_t *r)
{
    u_char                  *p;
    ngx_str_t                value;
    ngx_http_keyauth_ctx_t  *ctx;

    ctx = ngx_http_keyauth_get_ctx(r);

    if (ctx == NULL || !ctx->rate_checked || r != r->main) {
        return ngx_http_next_header_filter(r);
    }

    /* every response of a checked key, 429 included; hand-formatted since
     * this runs on every keyed request */

    p = ngx_pnalloc(r->pool, 2 * (sizeof("\"per-key\";q=;w=60") + NGX_INT64_LEN
                                  + NGX_INT32_LEN));
    if (p == NULL) {
        return NGX_ERROR;
    }

    value.data = p;
    p = ngx_cpymem(p, "\"per-key\";q=", sizeof("\"per-key\";q=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.limit);
    p = ngx_cpymem(p, ";w=60", sizeof(";w=60") - 1);
    value.len = p - value.data;

    if (ngx_http_keyauth_add_header(r, &ngx_http_keyauth_policy_name, &value)
        == NULL)
    {
        return NGX_ERROR;
    }

    value.data = p;
    p = ngx_cpymem(p, "\"per-key\";r=", sizeof("\"per-key\";r=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.remaining);
    p = ngx_cpymem(p, ";t=", sizeof(";t=") - 1);
    p = ngx_http_keyauth_uint(p, ctx->rate.reset_s);
    value.len = p - value.data;

    if (ngx_http_keyauth_add_header(r, &ngx_http_keyauth_ratelimit_name,
                                    &value)
        == NULL)
    {
        return NGX_ERROR;
    }

    return ngx_http_next_header_filter(r);
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
