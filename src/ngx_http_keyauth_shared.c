#include "ngx_http_keyauth_shared.h"
#include "ngx_http_keyauth_shm.h"


/* while Redis does not answer, a new connection is tried this often */
#define NGX_HTTP_KEYAUTH_SHARED_RETRY      1000
#define NGX_HTTP_KEYAUTH_SHARED_READ       16384


typedef struct {
    ngx_http_keyauth_main_conf_t  *kmcf;
    ka_shared_t                   *exchange;
    ngx_event_t                    timer;
    ngx_connection_t               timer_conn;  /* descriptor-less: the
                                                   debug log reads a timer's
                                                   data as a connection */
    ngx_peer_connection_t          peer;
    ngx_log_t                     *log;         /* the module's own lines */
    ngx_log_t                      quiet_log;   /* nginx's, on each failed
                                                   try: critical ones only */
    ngx_connection_t              *conn;
    const char                    *out;
    size_t                         out_len;
    size_t                         out_sent;
    unsigned                       connected:1;
    unsigned                       busy:1;       /* an exchange in flight */
    unsigned                       reading:1;    /* all sent: the answer is
                                                    awaited, its timer set */
    unsigned                       said_down:1;  /* logged; says so again
                                                    only after it came back */
    unsigned                       said_up:1;
} ngx_http_keyauth_shared_t;


static void ngx_http_keyauth_shared_tick(ngx_event_t *ev);
static void ngx_http_keyauth_shared_connect(void);
static void ngx_http_keyauth_shared_begin(void);
static void ngx_http_keyauth_shared_write(ngx_event_t *wev);
static void ngx_http_keyauth_shared_read(ngx_event_t *rev);
static void ngx_http_keyauth_shared_done(void);
static void ngx_http_keyauth_shared_fail(const char *why);
static ngx_uint_t ngx_http_keyauth_shared_leaving(void);
static void ngx_http_keyauth_shared_close(void);
static void ngx_http_keyauth_shared_next(ngx_msec_t after);


/* Only the exchanging worker has it. */
static ngx_http_keyauth_shared_t  ngx_http_keyauth_shared;


ngx_int_t
ngx_http_keyauth_shared_init_process(ngx_cycle_t *cycle)
{
    char                           err[256];
    ka_str_t                       stream, user, password;
    ngx_http_keyauth_zone_t       *zone;
    ngx_http_keyauth_shared_t     *x;
    ngx_http_keyauth_main_conf_t  *kmcf;

    /* one exchanger per nginx: worker 0, like the usage collector */
    if (!((ngx_process == NGX_PROCESS_WORKER && ngx_worker == 0)
          || ngx_process == NGX_PROCESS_SINGLE))
    {
        return NGX_OK;
    }

    kmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_keyauth_module);

    if (kmcf == NULL || kmcf->shared == NULL || kmcf->shm_zone == NULL) {
        return NGX_OK;
    }

    zone = kmcf->shm_zone->data;
    x = &ngx_http_keyauth_shared;

    stream.data = (const char *) kmcf->shared->stream.data;
    stream.len = kmcf->shared->stream.len;
    user.data = (const char *) kmcf->shared->user.data;
    user.len = kmcf->shared->user.len;
    password.data = (const char *) kmcf->shared->password.data;
    password.len = kmcf->shared->password.len;

    x->exchange = ka_shared_create(stream, user, password, zone->edge_id,
                                   err, sizeof(err));
    if (x->exchange == NULL) {
        ngx_log_error(NGX_LOG_ALERT, cycle->log, 0,
                      "keyauth_shared_limits: %s; limits stay local", err);
        return NGX_OK;
    }

    x->kmcf = kmcf;

    x->peer.sockaddr = kmcf->shared->addr->sockaddr;
    x->peer.socklen = kmcf->shared->addr->socklen;
    x->peer.name = &kmcf->shared->url;
    x->peer.get = ngx_event_get_peer;
    /* Redis away is said once, by this module: nginx's own words on each
     * failed try (connect() refused, recv() reset) would repeat every
     * second, so they go to a copy of the log that keeps critical ones */
    x->log = cycle->log;
    x->quiet_log = *cycle->log;
    if (x->quiet_log.log_level > NGX_LOG_CRIT) {
        x->quiet_log.log_level = NGX_LOG_CRIT;
    }
    x->peer.log = &x->quiet_log;
    x->peer.log_error = NGX_ERROR_INFO;

    x->timer_conn.fd = (ngx_socket_t) -1;
    x->timer.data = &x->timer_conn;
    x->timer.handler = ngx_http_keyauth_shared_tick;
    x->timer.log = cycle->log;
    /* a graceful shutdown does not wait for it */
    x->timer.cancelable = 1;

    ngx_add_timer(&x->timer, kmcf->shared->interval);

    return NGX_OK;
}


void
ngx_http_keyauth_shared_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    if (x->exchange == NULL) {
        return;
    }

    if (x->timer.timer_set) {
        ngx_del_timer(&x->timer);
    }

    ngx_http_keyauth_shared_close();

    ka_shared_destroy(x->exchange);
    x->exchange = NULL;
}


static void
ngx_http_keyauth_shared_tick(ngx_event_t *ev)
{
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    /* an exiting worker leaves the exchange to the new worker 0: two
     * exchangers would charge other edges' entries twice */
    if (ngx_http_keyauth_shared_leaving()) {
        ngx_http_keyauth_shared_close();
        return;
    }

    if (x->busy) {
        /* the connection's own timers end a slow exchange */
        return;
    }

    if (x->conn == NULL) {
        ngx_http_keyauth_shared_connect();
        return;
    }

    ngx_http_keyauth_shared_begin();
}


static void
ngx_http_keyauth_shared_connect(void)
{
    ngx_int_t                   rc;
    ngx_connection_t           *c;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    x->peer.tries = 1;
    x->peer.connection = NULL;

    rc = ngx_event_connect_peer(&x->peer);

    if (rc == NGX_ERROR || rc == NGX_BUSY || rc == NGX_DECLINED) {
        if (x->peer.connection) {
            ngx_close_connection(x->peer.connection);
            x->peer.connection = NULL;
        }

        ngx_http_keyauth_shared_fail("cannot connect");
        return;
    }

    c = x->peer.connection;
    x->conn = c;
    x->connected = (rc == NGX_OK);

    c->data = x;
    c->read->handler = ngx_http_keyauth_shared_read;
    c->write->handler = ngx_http_keyauth_shared_write;
    c->log = x->peer.log;
    c->read->log = c->log;
    c->write->log = c->log;

    if (rc == NGX_AGAIN) {
        /* connecting: the write event says when it is done */
        x->busy = 1;
        ngx_add_timer(c->write, x->kmcf->shared->timeout);
        return;
    }

    ngx_http_keyauth_shared_begin();
}


static void
ngx_http_keyauth_shared_begin(void)
{
    char                        err[256];
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    zone = x->kmcf->shm_zone->data;

    if (ka_shared_begin(x->exchange, zone->rate, &x->out, &x->out_len,
                        err, sizeof(err))
        != 0)
    {
        ngx_http_keyauth_shared_fail(err);
        return;
    }

    x->out_sent = 0;
    x->busy = 1;
    x->reading = 0;

    ngx_http_keyauth_shared_write(x->conn->write);
}


static void
ngx_http_keyauth_shared_write(ngx_event_t *wev)
{
    int                         err;
    ssize_t                     n;
    socklen_t                   len;
    ngx_connection_t           *c;
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    c = wev->data;

    if (wev->timedout) {
        ngx_http_keyauth_shared_fail(x->connected ? "timed out sending"
                                                  : "timed out connecting");
        return;
    }

    /* with epoll, every read event comes with a write event: once all is
     * sent, the answer's timer must not be set again by each of them */
    if (!x->busy || x->reading) {
        return;
    }

    if (!x->connected) {
        err = 0;
        len = sizeof(int);

        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, (void *) &err, &len)
            == -1)
        {
            err = ngx_socket_errno;
        }

        if (err) {
            ngx_http_keyauth_shared_fail("cannot connect");
            return;
        }

        x->connected = 1;

        if (wev->timer_set) {
            ngx_del_timer(wev);
        }

        ngx_http_keyauth_shared_begin();
        return;
    }

    zone = x->kmcf->shm_zone->data;

    while (x->out_sent < x->out_len) {
        n = c->send(c, (u_char *) x->out + x->out_sent,
                    x->out_len - x->out_sent);

        if (n == NGX_ERROR) {
            ngx_http_keyauth_shared_fail("cannot send");
            return;
        }

        if (n == NGX_AGAIN) {
            if (!wev->timer_set) {
                ngx_add_timer(wev, x->kmcf->shared->timeout);
            }

            if (ngx_handle_write_event(wev, 0) != NGX_OK) {
                ngx_http_keyauth_shared_fail("cannot send");
            }

            return;
        }

        x->out_sent += n;
        (void) ngx_atomic_fetch_add(&zone->shared.bytes_sent, n);
    }

    if (wev->timer_set) {
        ngx_del_timer(wev);
    }

    /* all sent: Redis's whole answer is due within the timeout */
    x->reading = 1;
    ngx_add_timer(c->read, x->kmcf->shared->timeout);

    if (ngx_handle_read_event(c->read, 0) != NGX_OK) {
        ngx_http_keyauth_shared_fail("cannot read");
        return;
    }

    if (c->read->ready) {
        ngx_http_keyauth_shared_read(c->read);
    }
}


static void
ngx_http_keyauth_shared_read(ngx_event_t *rev)
{
    int                         rc;
    char                        err[256];
    ssize_t                     n;
    ngx_connection_t           *c;
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    static u_char  buf[NGX_HTTP_KEYAUTH_SHARED_READ];

    c = rev->data;

    /* worker_shutdown_timeout closes every connection this way */
    if (c->close) {
        ngx_http_keyauth_shared_close();
        return;
    }

    if (rev->timedout) {
        ngx_http_keyauth_shared_fail("timed out waiting for the answer");
        return;
    }

    zone = x->kmcf->shm_zone->data;

    for ( ;; ) {
        n = c->recv(c, buf, sizeof(buf));

        if (n == NGX_AGAIN) {
            if (ngx_handle_read_event(rev, 0) != NGX_OK) {
                ngx_http_keyauth_shared_fail("cannot read");
            }

            return;
        }

        if (n == 0 || n == NGX_ERROR) {
            if (!x->busy) {
                /* an idle connection Redis let go (its "timeout"): the next
                 * exchange connects again */
                ngx_http_keyauth_shared_close();
                return;
            }

            ngx_http_keyauth_shared_fail("the connection was closed");
            return;
        }

        (void) ngx_atomic_fetch_add(&zone->shared.bytes_received, n);

        if (!x->busy) {
            ngx_http_keyauth_shared_fail("Redis sent bytes nobody asked for");
            return;
        }

        rc = ka_shared_feed(x->exchange, (const char *) buf, n, err,
                            sizeof(err));

        if (rc < 0) {
            ngx_http_keyauth_shared_fail(err);
            return;
        }

        if (rc == 1) {
            ngx_http_keyauth_shared_done();
            return;
        }
    }
}


static void
ngx_http_keyauth_shared_done(void)
{
    char                        err[256];
    ka_lock_t                   lock;
    ka_shared_result_t          res;
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    if (x->conn->read->timer_set) {
        ngx_del_timer(x->conn->read);
    }

    zone = x->kmcf->shm_zone->data;
    ngx_http_keyauth_zone_lock(x->kmcf->shm_zone, &lock);

    if (ka_shared_finish(x->exchange, zone->rate, ngx_http_keyauth_now_ns(),
                         &lock, &res, err, sizeof(err))
        != 0)
    {
        ngx_http_keyauth_shared_fail(err);
        return;
    }

    x->busy = 0;
    x->reading = 0;

    (void) ngx_atomic_fetch_add(&zone->shared.exchanges, 1);
    (void) ngx_atomic_fetch_add(&zone->shared.published, res.published);
    (void) ngx_atomic_fetch_add(&zone->shared.folded, res.folded);
    (void) ngx_atomic_fetch_add(&zone->shared.unplaced, res.unplaced);
    (void) ngx_atomic_fetch_add(&zone->shared.bad_entries, res.bad_entries);
    (void) ngx_atomic_fetch_add(&zone->shared.capped, res.capped);

    if (res.resynced) {
        /* the exchange worked, but what it read could not be trusted, and
         * the reads before it found nothing that was there: say so until an
         * exchange works again */
        (void) ngx_atomic_fetch_add(&zone->shared.resyncs, 1);
        zone->shared.up = 0;

        if (!x->said_down) {
            ngx_log_error(NGX_LOG_ERR, x->log, 0,
                          "keyauth_shared_limits: %V: the ids of stream "
                          "\"%V\" went backwards (%s): Redis's clock is "
                          "behind them or the stream was lost, and other "
                          "edges' entries were not read; reading again "
                          "after this edge's newest entry",
                          &x->kmcf->shared->url, &x->kmcf->shared->stream,
                          err);
            x->said_down = 1;
            x->said_up = 0;
        }

        ngx_http_keyauth_shared_next(x->kmcf->shared->interval);
        return;
    }

    zone->shared.up = 1;

    if (!x->said_up) {
        ngx_log_error(NGX_LOG_NOTICE, x->log, 0,
                      "keyauth_shared_limits: sharing rate limits through "
                      "%V%s", &x->kmcf->shared->url,
                      x->said_down ? " again" : "");
        x->said_up = 1;
        x->said_down = 0;
    }

    if (res.bad_entries) {
        ngx_log_error(NGX_LOG_WARN, x->log, 0,
                      "keyauth_shared_limits: %uz entries of an unknown "
                      "layout in \"%V\" skipped (an edge of another "
                      "version?)", res.bad_entries, &x->kmcf->shared->stream);
    }

    if (res.unplaced) {
        ngx_log_error(NGX_LOG_WARN, x->log, 0,
                      "keyauth_shared_limits: %uz keys spent at other edges "
                      "found no idle state in keyauth_zone \"%V\" and were "
                      "not charged here; make the zone larger (it holds the "
                      "fleet's active keys)", res.unplaced,
                      &x->kmcf->shm_zone->shm.name);
    }

    ngx_http_keyauth_shared_next(res.more ? 1 : x->kmcf->shared->interval);
}


/* Redis down, slow or wrong: the connection goes, the limits stay local
 * until an exchange works again, and what was spent meanwhile is not
 * shared later (ka_shared_reset says why). Said once. */
static void
ngx_http_keyauth_shared_fail(const char *why)
{
    ngx_http_keyauth_zone_t    *zone;
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    zone = x->kmcf->shm_zone->data;

    ngx_http_keyauth_shared_close();

    /* an old worker's last exchange, cut short by its exit: the counts in
     * the zone are the new worker 0's to publish, and Redis is not away */
    if (ngx_http_keyauth_shared_leaving()) {
        return;
    }

    (void) ngx_atomic_fetch_add(&zone->shared.failures, 1);
    zone->shared.up = 0;

    ka_rate_table_discard_spent(zone->rate);

    if (!x->said_down) {
        ngx_log_error(NGX_LOG_ERR, x->log, 0,
                      "keyauth_shared_limits: %V: %s; every key's limit is "
                      "this edge's alone until Redis answers again",
                      &x->kmcf->shared->url, why);
        x->said_down = 1;
        x->said_up = 0;
    }

    ngx_http_keyauth_shared_next(ngx_max(x->kmcf->shared->interval,
                                         NGX_HTTP_KEYAUTH_SHARED_RETRY));
}


static void
ngx_http_keyauth_shared_close(void)
{
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    if (x->conn) {
        ngx_close_connection(x->conn);
        x->conn = NULL;
    }

    x->peer.connection = NULL;
    x->connected = 0;
    x->busy = 0;
    x->reading = 0;

    if (x->exchange) {
        ka_shared_reset(x->exchange);
    }
}


static ngx_uint_t
ngx_http_keyauth_shared_leaving(void)
{
    return ngx_exiting || ngx_terminate || ngx_quit;
}


static void
ngx_http_keyauth_shared_next(ngx_msec_t after)
{
    ngx_http_keyauth_shared_t  *x = &ngx_http_keyauth_shared;

    if (ngx_http_keyauth_shared_leaving()) {
        return;
    }

    if (x->timer.timer_set) {
        ngx_del_timer(&x->timer);
    }

    ngx_add_timer(&x->timer, after);
}


u_char *
ngx_http_keyauth_shared_status(u_char *p, ngx_http_keyauth_zone_t *zone)
{
    ngx_http_keyauth_shared_stats_t  *s = &zone->shared;

    return ngx_sprintf(p,
        "# HELP keyauth_shared_limits_edge_info This edge's id in the "
        "stream (kept across reloads).\n"
        "# TYPE keyauth_shared_limits_edge_info gauge\n"
        "keyauth_shared_limits_edge_info{edge=\"%016xL\"} 1\n"
        "# HELP keyauth_shared_limits_up Whether the last exchange with "
        "Redis worked (0: limits are this edge's alone).\n"
        "# TYPE keyauth_shared_limits_up gauge\n"
        "keyauth_shared_limits_up %uA\n"
        "# HELP keyauth_shared_limits_exchanges_total Exchanges with Redis "
        "that worked.\n"
        "# TYPE keyauth_shared_limits_exchanges_total counter\n"
        "keyauth_shared_limits_exchanges_total %uA\n"
        "# HELP keyauth_shared_limits_failures_total Exchanges or "
        "connections that failed.\n"
        "# TYPE keyauth_shared_limits_failures_total counter\n"
        "keyauth_shared_limits_failures_total %uA\n"
        "# HELP keyauth_shared_limits_published_keys_total Keys whose "
        "spent requests this edge published.\n"
        "# TYPE keyauth_shared_limits_published_keys_total counter\n"
        "keyauth_shared_limits_published_keys_total %uA\n"
        "# HELP keyauth_shared_limits_folded_keys_total Keys whose requests "
        "spent at other edges were charged here.\n"
        "# TYPE keyauth_shared_limits_folded_keys_total counter\n"
        "keyauth_shared_limits_folded_keys_total %uA\n"
        "# HELP keyauth_shared_limits_unplaced_keys_total Keys spent at "
        "other edges not charged here: no idle state left in the zone.\n"
        "# TYPE keyauth_shared_limits_unplaced_keys_total counter\n"
        "keyauth_shared_limits_unplaced_keys_total %uA\n"
        "# HELP keyauth_shared_limits_bad_entries_total Stream entries of "
        "an unknown layout, skipped.\n"
        "# TYPE keyauth_shared_limits_bad_entries_total counter\n"
        "keyauth_shared_limits_bad_entries_total %uA\n"
        "# HELP keyauth_shared_limits_capped_keys_total Keys whose charge "
        "from one exchange was cut to what the fleet could have spent.\n"
        "# TYPE keyauth_shared_limits_capped_keys_total counter\n"
        "keyauth_shared_limits_capped_keys_total %uA\n"
        "# HELP keyauth_shared_limits_resyncs_total Times the stream's ids "
        "went backwards and reading started again.\n"
        "# TYPE keyauth_shared_limits_resyncs_total counter\n"
        "keyauth_shared_limits_resyncs_total %uA\n"
        "# HELP keyauth_shared_limits_sent_bytes_total Bytes sent to "
        "Redis.\n"
        "# TYPE keyauth_shared_limits_sent_bytes_total counter\n"
        "keyauth_shared_limits_sent_bytes_total %uA\n"
        "# HELP keyauth_shared_limits_received_bytes_total Bytes received "
        "from Redis.\n"
        "# TYPE keyauth_shared_limits_received_bytes_total counter\n"
        "keyauth_shared_limits_received_bytes_total %uA\n",
        zone->edge_id, s->up, s->exchanges, s->failures, s->published,
        s->folded, s->unplaced, s->bad_entries, s->capped, s->resyncs,
        s->bytes_sent,
        s->bytes_received);
}
