/*
 * One LMDB reader per worker process. The handle is opened in init_process
 * and retried at most once a second while it cannot be; every idle tick
 * (and by requests at most once a second in between) an open handle is
 * checked for its data.mdb or lock.mdb having been replaced (a store made
 * anew at the same path, a rebuild swapped in), and is then closed and
 * opened again.
 *
 * The read transaction itself is the core's (src/core/edge_store.cc): a
 * request keeps the previous request's snapshot while it is the newest and
 * renews it otherwise; MDB_MAP_RESIZED is handled there too. A timer here
 * lets an idle worker's snapshot go within a second, so that it never pins
 * the writer's old pages, and makes the replaced-store check on every tick,
 * so that a worker without requests lets a swapped-out store go (closes it,
 * opens the new one) within KA_EDGE_IDLE_MSEC too.
 */

#include "ngx_http_keyauth_store.h"


/* A store that failed to open is retried at most this often, and an open
 * one is checked this often for having been replaced under us. */
#define NGX_HTTP_KEYAUTH_REOPEN_MSEC  1000
#define NGX_HTTP_KEYAUTH_CHECK_MSEC   1000


static ka_edge_t   *ngx_http_keyauth_edge_handle;
static ngx_msec_t   ngx_http_keyauth_next_open;
static ngx_msec_t   ngx_http_keyauth_next_check;
static u_char      *ngx_http_keyauth_db_path;
static ngx_event_t   ngx_http_keyauth_idle_event;
/* a timer's data is read as a connection by nginx's debug log
 * (ngx_event_ident): this one has no descriptor */
static ngx_connection_t  ngx_http_keyauth_idle_conn;


static void ngx_http_keyauth_idle_timer(ngx_event_t *ev);


ngx_int_t
ngx_http_keyauth_store_init_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_main_conf_t  *kmcf;

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    kmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_keyauth_module);

    if (kmcf == NULL || kmcf->db_path.data == NULL) {
        return NGX_OK;
    }

    ngx_http_keyauth_db_path = kmcf->db_path.data;
    ngx_http_keyauth_next_open = ngx_current_msec;

    /* opened here, not in the master: LMDB handles do not survive fork */
    (void) ngx_http_keyauth_edge(cycle->log);

    ngx_http_keyauth_idle_conn.fd = (ngx_socket_t) -1;
    ngx_http_keyauth_idle_event.data = &ngx_http_keyauth_idle_conn;
    ngx_http_keyauth_idle_event.handler = ngx_http_keyauth_idle_timer;
    ngx_http_keyauth_idle_event.log = cycle->log;
    ngx_http_keyauth_idle_event.cancelable = 1;
    ngx_add_timer(&ngx_http_keyauth_idle_event, KA_EDGE_IDLE_MSEC);

    return NGX_OK;
}


static void
ngx_http_keyauth_idle_timer(ngx_event_t *ev)
{
    if (ngx_http_keyauth_edge_handle != NULL) {
        /* a store swapped out by a rebuild is let go here too, not only by
         * the next request: an idle worker would otherwise keep the old
         * data.mdb mapped and its disk space pinned (gigabytes at millions
         * of keys); the check is two stat() calls, here every tick */
        ngx_http_keyauth_next_check = ngx_current_msec;
        (void) ngx_http_keyauth_edge(ev->log);
    }

    if (ngx_http_keyauth_edge_handle != NULL) {
        ka_edge_idle(ngx_http_keyauth_edge_handle);
    }

    /* also while a worker finishes its requests after a reload: it must
     * not pin old pages until its last connection ends; being cancelable,
     * the timer does not hold the exit up */
    ngx_add_timer(ev, KA_EDGE_IDLE_MSEC);
}


void
ngx_http_keyauth_store_exit_process(ngx_cycle_t *cycle)
{
    if (ngx_http_keyauth_idle_event.timer_set) {
        ngx_del_timer(&ngx_http_keyauth_idle_event);
    }

    if (ngx_http_keyauth_edge_handle != NULL) {
        ka_edge_close(ngx_http_keyauth_edge_handle);
        ngx_http_keyauth_edge_handle = NULL;
    }
}


ka_edge_t *
ngx_http_keyauth_edge(ngx_log_t *log)
{
    char  err[256];

    if (ngx_http_keyauth_edge_handle != NULL) {

        if ((ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_next_check)
            < 0)
        {
            return ngx_http_keyauth_edge_handle;
        }

        ngx_http_keyauth_next_check = ngx_current_msec
                                      + NGX_HTTP_KEYAUTH_CHECK_MSEC;

        /* a store made anew at the same path would otherwise go unseen:
         * revoked keys of the old one would keep working */
        if (!ka_edge_stale(ngx_http_keyauth_edge_handle, err, sizeof(err))) {
            return ngx_http_keyauth_edge_handle;
        }

        ngx_log_error(NGX_LOG_WARN, log, 0,
                      "keyauth: key store \"%s\": %s; opening it again",
                      ngx_http_keyauth_db_path, err);

        ka_edge_close(ngx_http_keyauth_edge_handle);
        ngx_http_keyauth_edge_handle = NULL;
        ngx_http_keyauth_next_open = ngx_current_msec;
    }

    if (ngx_http_keyauth_db_path == NULL
        || (ngx_msec_int_t) (ngx_current_msec - ngx_http_keyauth_next_open) < 0)
    {
        return NULL;
    }

    ngx_http_keyauth_edge_handle = ka_edge_open(
                                       (const char *) ngx_http_keyauth_db_path,
                                       err, sizeof(err));

    if (ngx_http_keyauth_edge_handle == NULL) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "keyauth: cannot open key store \"%s\": %s; "
                      "API key requests fail with 503 until it opens",
                      ngx_http_keyauth_db_path, err);
        ngx_http_keyauth_next_open = ngx_current_msec
                                     + NGX_HTTP_KEYAUTH_REOPEN_MSEC;

    } else {
        ngx_http_keyauth_next_check = ngx_current_msec
                                      + NGX_HTTP_KEYAUTH_CHECK_MSEC;
    }

    return ngx_http_keyauth_edge_handle;
}
