#include "ngx_http_keyauth_usage.h"
#include "ngx_http_keyauth_shm.h"


#define NGX_HTTP_KEYAUTH_USAGE_INTERVAL  30000
#define NGX_HTTP_KEYAUTH_USAGE_MAX       60000
/* a key unused this long gives its usage slot back (once collected) */
#define NGX_HTTP_KEYAUTH_USAGE_IDLE_MS   300000
/* a usage env that keeps failing is logged at most this often */
#define NGX_HTTP_KEYAUTH_USAGE_LOG_MSEC  60000
/* day buckets are kept 400 days unless keyauth_usage_history says */
#define NGX_HTTP_KEYAUTH_USAGE_DAYS      400
#define NGX_HTTP_KEYAUTH_USAGE_DAYS_MAX  3660
#define NGX_HTTP_KEYAUTH_HOUR_MSEC       3600000


static void ngx_http_keyauth_usage_timer(ngx_event_t *ev);
static void ngx_http_keyauth_usage_flush(ngx_log_t *log);
static ngx_int_t ngx_http_keyauth_usage_flush_part(ngx_log_t *log);
static ngx_int_t ngx_http_keyauth_usage_open(ngx_log_t *log);
static void ngx_http_keyauth_usage_failed(ngx_log_t *log, const char *err);
static ngx_uint_t ngx_http_keyauth_usage_log_due(void);
static void ngx_http_keyauth_usage_schedule(ngx_event_t *ev);
static int64_t ngx_http_keyauth_usage_now_ms(void);


/* Only the collecting worker has these. */
static ngx_event_t                    ngx_http_keyauth_usage_event;
static ka_usage_env_t                *ngx_http_keyauth_usage_env;
static ngx_http_keyauth_main_conf_t  *ngx_http_keyauth_usage_kmcf;
static ngx_msec_t                     ngx_http_keyauth_usage_next_log;
/* the collection under way, and its next slot */
static ngx_uint_t                     ngx_http_keyauth_usage_walking;
static size_t                         ngx_http_keyauth_usage_walk_from;


char *
ngx_http_keyauth_usage_db(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    ngx_str_t  *value, path;

    if (kmcf->usage_db.data != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;
    path = value[1];

    if (ngx_strcmp(path.data, "off") == 0) {
        kmcf->usage_db.data = (u_char *) "";
        kmcf->usage_db.len = 0;
        return NGX_CONF_OK;
    }

    return ngx_http_keyauth_conf_path(cf, &path, &kmcf->usage_db);
}


char *
ngx_http_keyauth_usage_interval(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    ngx_str_t  *value;

    if (kmcf->usage_interval != NGX_CONF_UNSET_MSEC) {
        return "is duplicate";
    }

    value = cf->args->elts;

    kmcf->usage_interval = ngx_parse_time(&value[1], 0);

    /* the console promises usage at most 60 s stale */
    if (kmcf->usage_interval == (ngx_msec_t) NGX_ERROR
        || kmcf->usage_interval < 1000
        || kmcf->usage_interval > NGX_HTTP_KEYAUTH_USAGE_MAX)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_usage_interval\" \"%V\": "
                           "expected 1s to 60s", &value[1]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


char *
ngx_http_keyauth_usage_history(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    time_t      secs;
    ngx_str_t  *value;

    if (kmcf->usage_days != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    secs = ngx_parse_time(&value[1], 1);

    if (secs == (time_t) NGX_ERROR || secs % 86400 != 0
        || secs / 86400 < 1 || secs / 86400 > NGX_HTTP_KEYAUTH_USAGE_DAYS_MAX)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_usage_history\" \"%V\": "
                           "expected whole days from 1d to %dd",
                           &value[1], NGX_HTTP_KEYAUTH_USAGE_DAYS_MAX);
        return NGX_CONF_ERROR;
    }

    kmcf->usage_days = (ngx_uint_t) (secs / 86400);

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_keyauth_usage_conf(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf)
{
    if (kmcf->usage_interval == NGX_CONF_UNSET_MSEC) {
        kmcf->usage_interval = NGX_HTTP_KEYAUTH_USAGE_INTERVAL;
    }

    if (kmcf->usage_days == NGX_CONF_UNSET_UINT) {
        kmcf->usage_days = NGX_HTTP_KEYAUTH_USAGE_DAYS;
    }

    if (kmcf->usage_db.data != NULL) {
        return NGX_OK;
    }

    return ngx_http_keyauth_usage_default_dir(cf, kmcf, &kmcf->usage_db);
}


ngx_int_t
ngx_http_keyauth_usage_default_dir(ngx_conf_t *cf,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_str_t *dir)
{
    u_char  *p;

    /* a sibling of the store's directory, never inside it: keyauth-syncd
     * replaces that directory wholesale when it rebuilds the store */
    dir->len = kmcf->db_path.len + sizeof(KA_USAGE_DIR_SUFFIX) - 1;
    dir->data = ngx_pnalloc(cf->pool, dir->len + 1);
    if (dir->data == NULL) {
        return NGX_ERROR;
    }

    p = ngx_cpymem(dir->data, kmcf->db_path.data, kmcf->db_path.len);
    ngx_cpystrn(p, (u_char *) KA_USAGE_DIR_SUFFIX,
                sizeof(KA_USAGE_DIR_SUFFIX));

    return NGX_OK;
}


ngx_int_t
ngx_http_keyauth_usage_init_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_main_conf_t  *kmcf;

    /* one collector per nginx: worker 0 (a respawned worker 0 takes over;
     * during a reload the old and the new worker 0 may both collect, which
     * is safe: a delta is exchanged for zero, so only one takes it) */
    if (!((ngx_process == NGX_PROCESS_WORKER && ngx_worker == 0)
          || ngx_process == NGX_PROCESS_SINGLE))
    {
        return NGX_OK;
    }

    kmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_keyauth_module);

    if (kmcf == NULL || kmcf->db_path.data == NULL || kmcf->shm_zone == NULL
        || kmcf->usage_db.len == 0)
    {
        return NGX_OK;
    }

    ngx_http_keyauth_usage_kmcf = kmcf;

    ngx_http_keyauth_usage_event.handler = ngx_http_keyauth_usage_timer;
    ngx_http_keyauth_usage_event.log = cycle->log;
    ngx_http_keyauth_usage_event.data = kmcf;
    /* a graceful shutdown does not wait for it: exit_process flushes */
    ngx_http_keyauth_usage_event.cancelable = 1;

    ngx_http_keyauth_usage_schedule(&ngx_http_keyauth_usage_event);

    return NGX_OK;
}


void
ngx_http_keyauth_usage_count(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_ctx_t *ctx,
    ka_usage_outcome_e outcome, uint64_t units, int64_t now_ms,
    uint64_t now_ns)
{
    ka_lock_t                 lock;
    ngx_http_keyauth_zone_t  *zone;

    if (kmcf->shm_zone == NULL) {
        return;
    }

    ngx_http_keyauth_zone_lock(kmcf->shm_zone, &lock);
    zone = kmcf->shm_zone->data;

    if (ka_usage_count(zone->usage, &ctx->auth, outcome, units, now_ms,
                       now_ns, &lock))
    {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "keyauth_zone \"%V\" has no room for the usage of "
                      "more keys: requests go uncounted (keyauth_status "
                      "keyauth_usage_dropped_total); make the zone larger",
                      &kmcf->shm_zone->shm.name);
    }
}


void
ngx_http_keyauth_usage_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_main_conf_t  *kmcf;

    kmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_keyauth_module);

    if (kmcf == NULL || kmcf->db_path.data == NULL || kmcf->shm_zone == NULL
        || kmcf->usage_db.len == 0
        || (ngx_process != NGX_PROCESS_WORKER
            && ngx_process != NGX_PROCESS_SINGLE))
    {
        return;
    }

    /* every exiting worker collects what was counted since the last
     * collection, not only worker 0: after a binary upgrade or a change of
     * the zone's size, the old zone has no other collector, and the last of
     * its workers to leave takes what the others counted */
    ngx_http_keyauth_usage_kmcf = kmcf;
    ngx_http_keyauth_usage_flush(cycle->log);

    if (ngx_http_keyauth_usage_env != NULL) {
        ka_usage_env_close(ngx_http_keyauth_usage_env);
        ngx_http_keyauth_usage_env = NULL;
    }

    ngx_http_keyauth_usage_kmcf = NULL;
}


/*
 * A collection walks the zone one transaction (4096 slots) a timer turn,
 * the next part a millisecond later: the requests that arrived meanwhile
 * are served between parts. In one go, the deltas of a million busy keys
 * held the worker's event loop for a third of a second (bench/RESULTS.md).
 */
static void
ngx_http_keyauth_usage_timer(ngx_event_t *ev)
{
    ngx_int_t  rc;

    if (!ngx_http_keyauth_usage_walking) {
        /* each part files its counts in their own hours: the zone keeps a
         * key's hours apart (usage_table.h), however long the walk takes */
        ngx_http_keyauth_usage_walk_from = 0;
        ngx_http_keyauth_usage_walking = 1;
    }

    rc = ngx_http_keyauth_usage_flush_part(ev->log);

    if (ngx_exiting || ngx_terminate || ngx_quit) {
        /* exit_process collects what is left */
        return;
    }

    if (rc == NGX_AGAIN) {
        ngx_add_timer(ev, 1);
        return;
    }

    ngx_http_keyauth_usage_walking = 0;
    ngx_http_keyauth_usage_schedule(ev);
}


/* Every keyauth_usage_interval, and at every UTC hour: an hour's buckets
 * are complete soon after it ends (where a count lands does not depend on
 * when it is collected: docs/RELIABILITY.md). */
static void
ngx_http_keyauth_usage_schedule(ngx_event_t *ev)
{
    int64_t                        now, next_hour, delay;
    ngx_http_keyauth_main_conf_t  *kmcf = ev->data;

    now = ngx_http_keyauth_usage_now_ms();
    next_hour = (now / NGX_HTTP_KEYAUTH_HOUR_MSEC + 1)
                * NGX_HTTP_KEYAUTH_HOUR_MSEC;

    delay = ngx_min((int64_t) kmcf->usage_interval, next_hour - now);

    ngx_add_timer(ev, (ngx_msec_t) delay);
}


static int64_t
ngx_http_keyauth_usage_now_ms(void)
{
    ngx_time_t  *tp;

    ngx_time_update();
    tp = ngx_timeofday();

    return (int64_t) tp->sec * 1000 + tp->msec;
}


/* The whole zone in one go: on exit. Never fails anything but itself:
 * counts stay in the zone for the next collection (another process's). */
static void
ngx_http_keyauth_usage_flush(ngx_log_t *log)
{
    ngx_http_keyauth_usage_walk_from = 0;

    while (ngx_http_keyauth_usage_flush_part(log) == NGX_AGAIN) {
        /* void */
    }
}


/* One transaction of the collection under way: NGX_AGAIN while slots are
 * left, NGX_OK once the walk is over, NGX_ERROR when it stopped (counts
 * stay in the zone for the next collection). */
static ngx_int_t
ngx_http_keyauth_usage_flush_part(ngx_log_t *log)
{
    char                           err[256];
    long                           n;
    ka_lock_t                      lock;
    ngx_http_keyauth_zone_t       *zone;
    ngx_http_keyauth_main_conf_t  *kmcf;

    kmcf = ngx_http_keyauth_usage_kmcf;
    zone = kmcf->shm_zone->data;

    if (ngx_http_keyauth_usage_open(log) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_keyauth_zone_lock(kmcf->shm_zone, &lock);

    n = ka_usage_flush_part(zone->usage, ngx_http_keyauth_usage_env,
                            &ngx_http_keyauth_usage_walk_from,
                            ngx_http_keyauth_usage_now_ms(),
                            NGX_HTTP_KEYAUTH_USAGE_IDLE_MS, &lock,
                            err, sizeof(err));

    if (n < 0) {
        ngx_http_keyauth_usage_failed(log, err);
        return NGX_ERROR;
    }

    (void) ngx_atomic_fetch_add(&zone->usage_collection_parts, 1);

    if (ngx_http_keyauth_usage_walk_from < ka_usage_table_slots(zone->usage)) {
        return NGX_AGAIN;
    }

    (void) ngx_atomic_fetch_add(&zone->usage_collections, 1);

    return NGX_OK;
}


static ngx_int_t
ngx_http_keyauth_usage_open(ngx_log_t *log)
{
    char                           err[256];
    ngx_http_keyauth_zone_t       *zone;
    ngx_http_keyauth_main_conf_t  *kmcf;

    kmcf = ngx_http_keyauth_usage_kmcf;
    zone = kmcf->shm_zone->data;

    /* a store removed or replaced at its path (docs/RELIABILITY.md's
     * recovery of a corrupt one) is let go at a walk's start, and the path
     * opened anew: never written into deleted files until a reload */
    if (ngx_http_keyauth_usage_env != NULL
        && ngx_http_keyauth_usage_walk_from == 0
        && ka_usage_env_replaced(ngx_http_keyauth_usage_env))
    {
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "keyauth: the usage store \"%V\" was removed or "
                      "replaced: opening it anew", &kmcf->usage_db);
        ka_usage_env_close(ngx_http_keyauth_usage_env);
        ngx_http_keyauth_usage_env = NULL;
    }

    if (ngx_http_keyauth_usage_env != NULL) {
        return NGX_OK;
    }

    ngx_http_keyauth_usage_env = ka_usage_env_open(
                                     (const char *) kmcf->usage_db.data,
                                     (uint32_t) kmcf->usage_days,
                                     err, sizeof(err));

    if (ngx_http_keyauth_usage_env != NULL) {
        return NGX_OK;
    }

    if (ngx_http_keyauth_usage_log_due()) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "keyauth: cannot open the usage store \"%V\": "
                      "%s; usage is kept in keyauth_zone and "
                      "stored once it opens", &kmcf->usage_db, err);
    }

    (void) ngx_atomic_fetch_add(&zone->usage_flush_errors, 1);

    return NGX_ERROR;
}


static void
ngx_http_keyauth_usage_failed(ngx_log_t *log, const char *err)
{
    ngx_http_keyauth_zone_t       *zone;
    ngx_http_keyauth_main_conf_t  *kmcf;

    kmcf = ngx_http_keyauth_usage_kmcf;
    zone = kmcf->shm_zone->data;

    (void) ngx_atomic_fetch_add(&zone->usage_flush_errors, 1);

    if (ngx_http_keyauth_usage_log_due()) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "keyauth: cannot store usage in \"%V\": %s; kept in "
                      "keyauth_zone for the next collection",
                      &kmcf->usage_db, err);
    }

    /* a broken handle (a full map, a removed directory) is opened anew */
    ka_usage_env_close(ngx_http_keyauth_usage_env);
    ngx_http_keyauth_usage_env = NULL;
}


/* A usage store that keeps failing is logged at most once a minute. */
static ngx_uint_t
ngx_http_keyauth_usage_log_due(void)
{
    if ((ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_usage_next_log)
        < 0)
    {
        return 0;
    }

    ngx_http_keyauth_usage_next_log = ngx_current_msec
                                      + NGX_HTTP_KEYAUTH_USAGE_LOG_MSEC;
    return 1;
}
