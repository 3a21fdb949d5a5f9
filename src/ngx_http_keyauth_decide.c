#include "ngx_http_keyauth_decide.h"
#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_shm.h"
#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_usage.h"


ngx_http_keyauth_outcome_e
ngx_http_keyauth_decide(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx)
{
    char                        key_id[KA_ID_TEXT_LEN];
    int64_t                     now_ms;
    uint64_t                    now_ns;
    ka_lock_t                   lock;
    ngx_time_t                 *tp;
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_outcome_e  outcome;

    if (kmcf->shm_zone != NULL) {
        zone = kmcf->shm_zone->data;
        ka_zone_prefetch(zone->rate, zone->usage, &ctx->auth);
    }

    tp = ngx_timeofday();
    now_ms = (int64_t) tp->sec * 1000 + tp->msec;

    outcome = ngx_http_keyauth_quota_check(r, kmcf, ctx, now_ms);
    if (outcome != NGX_HTTP_KEYAUTH_OK) {
        goto done;
    }

    if (kmcf->shm_zone == NULL) {
        outcome = ngx_http_keyauth_quota_charge(r, kmcf, ctx, now_ms);
        ctx->admitted = (outcome == NGX_HTTP_KEYAUTH_OK);
        goto done;
    }

    ngx_http_keyauth_zone_lock(kmcf->shm_zone, &lock);

    zone = kmcf->shm_zone->data;
    now_ns = ngx_http_keyauth_now_ns();

    ka_rate_check(zone->rate, &ctx->auth, now_ns, kmcf->shared != NULL, &lock,
                  &ctx->rate);
    ctx->rate_checked = 1;

    /* then the charge, of an admitted call only; refused when another
     * worker took the last units */
    if (ctx->rate.allowed) {
        outcome = ngx_http_keyauth_quota_charge(r, kmcf, ctx, now_ms);
        if (outcome != NGX_HTTP_KEYAUTH_OK) {
            goto done;
        }
    }

    /* usage is counted where the decision is made; collected elsewhere.
     * A metered call's units are counted when its answer reports them. */
    ngx_http_keyauth_usage_count(r, kmcf, ctx,
                                 ctx->rate.allowed ? KA_USAGE_ALLOWED
                                                   : KA_USAGE_RATE_LIMITED,
                                 ctx->rate.allowed && ctx->cost_header == NULL
                                 ? ctx->cost : 0,
                                 now_ms, now_ns);

    if (ctx->rate.warn_full) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth_zone \"%V\" is full: the rate state of a "
                      "busy key was reused; make the zone larger",
                      &kmcf->shm_zone->shm.name);
    }

    if (ctx->rate.allowed) {
        /* only a call let through: a refusal that turns into an internal
         * redirect (error_page of the 400 a broken body gives) is checked
         * again there, not let through uncharged */
        ctx->admitted = 1;
        goto done;
    }

    outcome = NGX_HTTP_KEYAUTH_RATE_LIMITED;

    if (r->connection->log->log_level >= NGX_LOG_INFO) {
        ka_format_key_id(ctx->auth.key_id_bin, key_id);
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "keyauth: API key %*s is over its rate of %uD/min",
                      (size_t) KA_ID_TEXT_LEN, key_id, ctx->rate.limit);
    }

done:

    ctx->outcome = outcome;
    ngx_http_keyauth_count(kmcf, outcome);

    return outcome;
}


void
ngx_http_keyauth_log_auth(ngx_http_request_t *r, ka_auth_result_t *auth)
{
    ngx_uint_t  level;

    level = (auth->log_level == KA_LOG_ERROR) ? NGX_LOG_ERR : NGX_LOG_INFO;
    ngx_log_error(level, r->connection->log, 0, "keyauth: %s", auth->reason);
}
