#include "ngx_http_keyauth_quota_ledger.h"
#include "ngx_http_keyauth_store.h"
#include "ngx_http_keyauth_usage.h"


/* a ledger that cannot be opened is tried again this often */
#define NGX_HTTP_KEYAUTH_QUOTA_RETRY_MSEC  1000
/* a failure of the timer is logged at most this often */
#define NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC    60000
/* the next part of a sweep under way, this soon: requests between parts */
#define NGX_HTTP_KEYAUTH_QUOTA_PART_MSEC   1
/* keyauth_quota_size's default (16m: 262,144 slots) and bounds */
#define NGX_HTTP_KEYAUTH_QUOTA_SIZE        (16 * 1024 * 1024)
#define NGX_HTTP_KEYAUTH_QUOTA_SLOT_BYTES  64
#define NGX_HTTP_KEYAUTH_QUOTA_MIN_SIZE    4096
#define NGX_HTTP_KEYAUTH_QUOTA_MAX_SIZE    ((size_t) 4 * 1024 * 1024 * 1024)


static void ngx_http_keyauth_quota_open(ngx_event_t *ev);
static void ngx_http_keyauth_quota_timer(ngx_event_t *ev);
static void ngx_http_keyauth_quota_sync(ngx_log_t *log);


/* Every worker maps the ledger; worker 0 tends it. */
static ka_quota_ledger_t             *ngx_http_keyauth_ledger;
static ngx_http_keyauth_main_conf_t  *ngx_http_keyauth_quota_kmcf;
static ngx_event_t                    ngx_http_keyauth_quota_open_event;
static ngx_event_t                    ngx_http_keyauth_quota_event;
/* a timer's data is read as a connection by nginx's debug log
 * (ngx_event_ident): these have no descriptor */
static ngx_connection_t               ngx_http_keyauth_quota_conn;
static ngx_msec_t                     ngx_http_keyauth_quota_next_log;
/* a sweep is under way (its parts come a millisecond apart) */
static ngx_uint_t                     ngx_http_keyauth_quota_sweeping;


char *
ngx_http_keyauth_quota_size(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    ssize_t     size;
    ngx_str_t  *value;

    if (kmcf->quota_size != NGX_CONF_UNSET_SIZE) {
        return "is duplicate";
    }

    value = cf->args->elts;
    size = ngx_parse_size(&value[1]);

    if (size == NGX_ERROR || (size_t) size < NGX_HTTP_KEYAUTH_QUOTA_MIN_SIZE
        || (size_t) size > NGX_HTTP_KEYAUTH_QUOTA_MAX_SIZE)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_quota_size\" \"%V\": expected "
                           "a size from 4k to 4g", &value[1]);
        return NGX_CONF_ERROR;
    }

    kmcf->quota_size = size;

    /* what it holds, as keyauth_zone says what it holds */
    ngx_conf_log_error(NGX_LOG_NOTICE, cf, 0,
                       "keyauth_quota_size %V: room for %uz keys and "
                       "accounts with use in a quota period (64 bytes each); "
                       "the ledger grows by itself past three quarters",
                       &value[1], (size_t) size
                                  / NGX_HTTP_KEYAUTH_QUOTA_SLOT_BYTES);

    return NGX_CONF_OK;
}


ngx_int_t
ngx_http_keyauth_quota_conf(ngx_conf_t *cf, ngx_http_keyauth_main_conf_t *kmcf)
{
    if (kmcf->quota_size == NGX_CONF_UNSET_SIZE) {
        kmcf->quota_size = NGX_HTTP_KEYAUTH_QUOTA_SIZE;
    }

    if (kmcf->usage_db.len) {
        kmcf->quota_dir = kmcf->usage_db;
        return NGX_OK;
    }

    /* keyauth_usage_db off: usage is not stored, but quotas are money and
     * keep their ledger where keyauthd looks for it by default */
    return ngx_http_keyauth_usage_default_dir(cf, kmcf, &kmcf->quota_dir);
}


ngx_int_t
ngx_http_keyauth_quota_init_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_main_conf_t  *kmcf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    kmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_keyauth_module);
    if (kmcf == NULL || kmcf->db_path.data == NULL
        || kmcf->quota_dir.len == 0)
    {
        return NGX_OK;
    }

    ngx_http_keyauth_quota_kmcf = kmcf;
    ngx_http_keyauth_quota_conn.fd = (ngx_socket_t) -1;

    ngx_http_keyauth_quota_open_event.handler = ngx_http_keyauth_quota_open;
    ngx_http_keyauth_quota_open_event.log = cycle->log;
    ngx_http_keyauth_quota_open_event.data = &ngx_http_keyauth_quota_conn;
    ngx_http_keyauth_quota_open_event.cancelable = 1;

    /* before the first request; if it fails, a timer tries again, never a
     * request */
    ngx_http_keyauth_quota_open(&ngx_http_keyauth_quota_open_event);

    /* one worker tends the ledger (a respawned worker 0 takes over; during
     * a reload the old and the new one both may, which is safe: a release
     * and a growth are made under the file's lock) */
    if (ngx_worker == 0) {
        ngx_http_keyauth_quota_event.handler = ngx_http_keyauth_quota_timer;
        ngx_http_keyauth_quota_event.log = cycle->log;
        ngx_http_keyauth_quota_event.data = &ngx_http_keyauth_quota_conn;
        ngx_http_keyauth_quota_event.cancelable = 1;
        ngx_add_timer(&ngx_http_keyauth_quota_event, kmcf->usage_interval);
    }

    return NGX_OK;
}


static void
ngx_http_keyauth_quota_open(ngx_event_t *ev)
{
    char                           err[256];
    ngx_http_keyauth_main_conf_t  *kmcf = ngx_http_keyauth_quota_kmcf;

    ngx_http_keyauth_ledger = ka_quota_open((const char *) kmcf->quota_dir.data,
                                            kmcf->quota_size
                                            / NGX_HTTP_KEYAUTH_QUOTA_SLOT_BYTES,
                                            err, sizeof(err));
    if (ngx_http_keyauth_ledger != NULL) {
        return;
    }

    if ((ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_quota_next_log)
        >= 0)
    {
        ngx_log_error(NGX_LOG_ERR, ev->log, 0,
                      "keyauth: cannot open the quota ledger in \"%V\": %s; "
                      "keys and accounts with a quota are refused with 503 "
                      "until it opens", &kmcf->quota_dir, err);
        ngx_http_keyauth_quota_next_log = ngx_current_msec
                                          + NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC;
    }

    if (!ngx_exiting && !ngx_terminate && !ngx_quit) {
        ngx_add_timer(ev, NGX_HTTP_KEYAUTH_QUOTA_RETRY_MSEC);
    }
}


void
ngx_http_keyauth_quota_exit_process(ngx_cycle_t *cycle)
{
    if (ngx_http_keyauth_ledger == NULL) {
        return;
    }

    /* what this worker charged since the last sync, to disk */
    ngx_http_keyauth_quota_sync(cycle->log);

    ka_quota_close(ngx_http_keyauth_ledger);
    ngx_http_keyauth_ledger = NULL;
}


ka_quota_ledger_t *
ngx_http_keyauth_quota_ledger(void)
{
    return ngx_http_keyauth_ledger;
}


/*
 * Every keyauth_usage_interval: the ledger's pages to disk, then a sweep in
 * parts of KA_QUOTA_SWEEP_PART slots, a millisecond apart, so that requests
 * are served between them; once a sweep is over, the next interval.
 */
static void
ngx_http_keyauth_quota_timer(ngx_event_t *ev)
{
    ngx_time_t                    *tp;
    ka_quota_tend_t                tend;
    ka_quota_stats_t               stats;
    ngx_http_keyauth_main_conf_t  *kmcf = ngx_http_keyauth_quota_kmcf;

    if (ngx_exiting || ngx_terminate || ngx_quit) {
        return;
    }

    if (ngx_http_keyauth_ledger == NULL) {
        ngx_add_timer(ev, kmcf->usage_interval);
        return;
    }

    if (!ngx_http_keyauth_quota_sweeping) {
        ngx_http_keyauth_quota_sync(ev->log);
        ngx_http_keyauth_quota_sweeping = 1;
    }

    ngx_time_update();
    tp = ngx_timeofday();

    if (ka_quota_tend(ngx_http_keyauth_ledger, ngx_http_keyauth_edge(ev->log),
                      (int64_t) tp->sec * 1000 + tp->msec, &tend)
        != 0
        && (ngx_msec_int_t) (ngx_current_msec
                             - ngx_http_keyauth_quota_next_log) >= 0)
    {
        ka_quota_stats(ngx_http_keyauth_ledger, &stats);
        ngx_log_error(NGX_LOG_ERR, ev->log, 0,
                      "keyauth: the quota ledger in \"%V\" has %uL of its "
                      "%uL slots live and cannot grow: %s; a key or account "
                      "that finds no room goes uncounted (keyauth_status "
                      "keyauth_quota_ledger_no_room_total)",
                      &kmcf->quota_dir, stats.live, stats.slots, tend.err);
        ngx_http_keyauth_quota_next_log = ngx_current_msec
                                          + NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC;
    }

    if (tend.grew) {
        ka_quota_stats(ngx_http_keyauth_ledger, &stats);
        ngx_log_error(NGX_LOG_NOTICE, ev->log, 0,
                      "keyauth: the quota ledger in \"%V\" had %uL slots "
                      "live and grew to %uL slots", &kmcf->quota_dir,
                      tend.live, stats.slots);
    }

    if (!tend.walked) {
        ngx_add_timer(ev, NGX_HTTP_KEYAUTH_QUOTA_PART_MSEC);
        return;
    }

    ngx_http_keyauth_quota_sweeping = 0;
    ngx_add_timer(ev, kmcf->usage_interval);
}


static void
ngx_http_keyauth_quota_sync(ngx_log_t *log)
{
    char  err[256];

    if (ka_quota_sync(ngx_http_keyauth_ledger, err, sizeof(err)) == 0) {
        return;
    }

    if ((ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_quota_next_log)
        >= 0)
    {
        ngx_log_error(NGX_LOG_ERR, log, 0, "keyauth: %s", err);
        ngx_http_keyauth_quota_next_log = ngx_current_msec
                                          + NGX_HTTP_KEYAUTH_QUOTA_LOG_MSEC;
    }
}


u_char *
ngx_http_keyauth_quota_status(u_char *p)
{
    ka_quota_stats_t  stats;

    if (ngx_http_keyauth_ledger == NULL) {
        return p;
    }

    ka_quota_stats(ngx_http_keyauth_ledger, &stats);

    return ngx_sprintf(p,
            "# HELP keyauth_quota_ledger_slots Keys and accounts the quota "
            "ledger has room for (it grows past three quarters live).\n"
            "# TYPE keyauth_quota_ledger_slots gauge\n"
            "keyauth_quota_ledger_slots %uL\n"
            "# HELP keyauth_quota_ledger_live_slots Slots with use in a "
            "period not over, as the last sweep counted.\n"
            "# TYPE keyauth_quota_ledger_live_slots gauge\n"
            "keyauth_quota_ledger_live_slots %uL\n"
            "# HELP keyauth_quota_ledger_no_room_total Keys or accounts that "
            "found no room in the ledger (their quota went uncounted).\n"
            "# TYPE keyauth_quota_ledger_no_room_total counter\n"
            "keyauth_quota_ledger_no_room_total %uL\n",
            stats.slots, stats.live, stats.no_room);
}
