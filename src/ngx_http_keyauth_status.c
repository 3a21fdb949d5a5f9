#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_quota_ledger.h"
#include "ngx_http_keyauth_shared.h"
#include "ngx_http_keyauth_shm.h"


typedef struct {
    ngx_atomic_t  outcomes[NGX_HTTP_KEYAUTH_OUTCOMES];
    ngx_atomic_t  units_charged;
} ngx_http_keyauth_stats_t;


static ngx_int_t ngx_http_keyauth_init_stats_zone(ngx_shm_zone_t *shm_zone,
    void *data);


static const char  *ngx_http_keyauth_outcome_names[] = {
    "ok", "key_required", "invalid_key", "insufficient_scope",
    "unavailable", "rate_limited", "account_suspended", "quota_exceeded",
    "ip_not_allowed"
};


/* The stats zone's own tag: a "keyauth_zone keyauth_stats:..." must be
 * refused as a clash, not handed the same zone as the rate table. */
static u_char  ngx_http_keyauth_stats_tag;


ngx_int_t
ngx_http_keyauth_stats_zone(ngx_conf_t *cf, ngx_http_keyauth_main_conf_t *kmcf)
{
    ngx_str_t  name = ngx_string("keyauth_stats");

    kmcf->stats_zone = ngx_shared_memory_add(cf, &name, 8 * ngx_pagesize,
                                             &ngx_http_keyauth_stats_tag);
    if (kmcf->stats_zone == NULL) {
        return NGX_ERROR;
    }

    kmcf->stats_zone->init = ngx_http_keyauth_init_stats_zone;

    return NGX_OK;
}


static ngx_int_t
ngx_http_keyauth_init_stats_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_slab_pool_t           *shpool;
    ngx_http_keyauth_stats_t  *stats;

    if (ngx_http_keyauth_zone_reused(shm_zone, data)) {
        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    stats = ngx_slab_calloc(shpool, sizeof(ngx_http_keyauth_stats_t));
    if (stats == NULL) {
        return NGX_ERROR;
    }

    shpool->data = stats;
    shm_zone->data = stats;

    return NGX_OK;
}


void
ngx_http_keyauth_count(ngx_http_keyauth_main_conf_t *kmcf,
    ngx_http_keyauth_outcome_e outcome)
{
    ngx_http_keyauth_stats_t  *stats;

    stats = kmcf->stats_zone->data;
    (void) ngx_atomic_fetch_add(&stats->outcomes[outcome], 1);
}


void
ngx_http_keyauth_count_units(ngx_http_keyauth_main_conf_t *kmcf,
    uint64_t units)
{
    ngx_http_keyauth_stats_t  *stats;

    stats = kmcf->stats_zone->data;
    (void) ngx_atomic_fetch_add(&stats->units_charged, (ngx_atomic_int_t) units);
}


ngx_int_t
ngx_http_keyauth_status_handler(ngx_http_request_t *r)
{
    u_char                        *p;
    size_t                         size;
    ngx_int_t                      rc;
    ngx_str_t                      body;
    ngx_uint_t                     i;
    ngx_http_keyauth_zone_t       *zone;
    ngx_http_keyauth_stats_t      *stats;
    ngx_http_keyauth_main_conf_t  *kmcf;

    static ngx_str_t  type = ngx_string("text/plain; version=0.0.4");

    rc = ngx_http_keyauth_get_only(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    kmcf = ngx_http_get_module_main_conf(r, ngx_http_keyauth_module);

    size = 512 + NGX_HTTP_KEYAUTH_OUTCOMES * (64 + NGX_ATOMIC_T_LEN)
           + 2048 + 256 + 8 * NGX_INT64_LEN
           + NGX_HTTP_KEYAUTH_QUOTA_STATUS_LEN;

    if (kmcf->shared) {
        size += NGX_HTTP_KEYAUTH_SHARED_STATUS_LEN;
    }

    body.data = ngx_pnalloc(r->pool, size);
    if (body.data == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    p = ngx_sprintf(body.data,
            "# HELP keyauth_requests_total Requests checked by keyauth, "
            "by outcome.\n"
            "# TYPE keyauth_requests_total counter\n");

    stats = kmcf->stats_zone ? kmcf->stats_zone->data : NULL;

    for (i = 0; stats && i < NGX_HTTP_KEYAUTH_OUTCOMES; i++) {
        p = ngx_sprintf(p, "keyauth_requests_total{outcome=\"%s\"} %uA\n",
                        ngx_http_keyauth_outcome_names[i],
                        stats->outcomes[i]);
    }

    if (stats) {
        p = ngx_sprintf(p,
                "# HELP keyauth_quota_units_charged_total Units charged to "
                "keys' and accounts' quotas.\n"
                "# TYPE keyauth_quota_units_charged_total counter\n"
                "keyauth_quota_units_charged_total %uA\n",
                stats->units_charged);
    }

    p = ngx_http_keyauth_quota_status(p);

    zone = kmcf->shm_zone ? kmcf->shm_zone->data : NULL;

    if (zone) {
        p = ngx_sprintf(p,
                "# HELP keyauth_rate_zone_slots Keys the keyauth_zone can "
                "hold.\n"
                "# TYPE keyauth_rate_zone_slots gauge\n"
                "keyauth_rate_zone_slots %uz\n"
                "# HELP keyauth_rate_zone_busy_evictions_total Live rate "
                "states reused because the zone was full.\n"
                "# TYPE keyauth_rate_zone_busy_evictions_total counter\n"
                "keyauth_rate_zone_busy_evictions_total %uL\n"
                "# HELP keyauth_usage_zone_slots Keys whose usage the "
                "keyauth_zone can count at once.\n"
                "# TYPE keyauth_usage_zone_slots gauge\n"
                "keyauth_usage_zone_slots %uz\n"
                "# HELP keyauth_usage_dropped_total Requests not counted in "
                "usage because the zone had no room for their key.\n"
                "# TYPE keyauth_usage_dropped_total counter\n"
                "keyauth_usage_dropped_total %uL\n"
                "# HELP keyauth_usage_flush_errors_total Usage collections "
                "that could not be stored (kept and retried).\n"
                "# TYPE keyauth_usage_flush_errors_total counter\n"
                "keyauth_usage_flush_errors_total %uA\n"
                "# HELP keyauth_usage_collections_total Usage collections "
                "that walked the whole zone.\n"
                "# TYPE keyauth_usage_collections_total counter\n"
                "keyauth_usage_collections_total %uA\n"
                "# HELP keyauth_usage_collection_parts_total Transactions "
                "of the usage collections (at most 4096 keys' slots each; "
                "requests are served between them).\n"
                "# TYPE keyauth_usage_collection_parts_total counter\n"
                "keyauth_usage_collection_parts_total %uA\n",
                ka_rate_table_slots(zone->rate),
                (uint64_t) ka_rate_table_busy_evictions(zone->rate),
                ka_usage_table_slots(zone->usage),
                (uint64_t) ka_usage_table_drops(zone->usage),
                zone->usage_flush_errors, zone->usage_collections,
                zone->usage_collection_parts);

        if (kmcf->shared) {
            p = ngx_http_keyauth_shared_status(p, zone);
        }
    }

    body.len = p - body.data;

    return ngx_http_keyauth_send(r, NGX_HTTP_OK, &type, &body);
}
