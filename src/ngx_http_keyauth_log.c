#include "ngx_http_keyauth_log.h"
#include "core/keyauth_core.h"


/* A log that already had a writer (syslog, memory) keeps it, behind ours. */
typedef struct {
    ngx_log_writer_pt   writer;
    void               *wdata;
} ngx_http_keyauth_wrapped_t;


static void ngx_http_keyauth_log_writer(ngx_log_t *log, ngx_uint_t level,
    u_char *buf, size_t len);
static void ngx_http_keyauth_wrapped_writer(ngx_log_t *log, ngx_uint_t level,
    u_char *buf, size_t len);
static void ngx_http_keyauth_redact_chain(ngx_pool_t *pool, ngx_log_t *log);
static void ngx_http_keyauth_redact_location(ngx_pool_t *pool,
    ngx_http_core_loc_conf_t *clcf);
static void ngx_http_keyauth_redact_tree(ngx_pool_t *pool,
    ngx_http_location_tree_node_t *node);


static void
ngx_http_keyauth_log_writer(ngx_log_t *log, ngx_uint_t level, u_char *buf,
    size_t len)
{
    ssize_t  n;

    /* in place: later logs of the chain and the stderr copy see it masked */
    (void) ka_redact_secrets((char *) buf, len);

    if (ngx_time() == log->disk_full_time) {
        return;
    }

    n = ngx_write_fd(log->file->fd, buf, len);

    if (n == -1 && ngx_errno == NGX_ENOSPC) {
        log->disk_full_time = ngx_time();
    }
}


static void
ngx_http_keyauth_wrapped_writer(ngx_log_t *log, ngx_uint_t level, u_char *buf,
    size_t len)
{
    ngx_log_t                    original;
    ngx_http_keyauth_wrapped_t  *w = log->wdata;

    (void) ka_redact_secrets((char *) buf, len);

    /* the original writer reads its own wdata from the log it is given: a
     * copy, since it may itself log to this very log (a failed syslog send
     * does), which must still find ours */
    original = *log;
    original.wdata = w->wdata;
    w->writer(&original, level, buf, len);
}


static void
ngx_http_keyauth_redact_chain(ngx_pool_t *pool, ngx_log_t *log)
{
    ngx_http_keyauth_wrapped_t  *w;

    for ( /* void */ ; log; log = log->next) {

        if (log->writer == ngx_http_keyauth_log_writer
            || log->writer == ngx_http_keyauth_wrapped_writer)
        {
            continue;
        }

        if (log->writer == NULL) {
            if (log->file != NULL) {
                log->writer = ngx_http_keyauth_log_writer;
            }
            continue;
        }

        w = ngx_palloc(pool, sizeof(ngx_http_keyauth_wrapped_t));
        if (w == NULL) {
            continue;
        }

        w->writer = log->writer;
        w->wdata = log->wdata;
        log->wdata = w;
        log->writer = ngx_http_keyauth_wrapped_writer;
    }
}


static void
ngx_http_keyauth_redact_tree(ngx_pool_t *pool,
    ngx_http_location_tree_node_t *node)
{
    if (node == NULL) {
        return;
    }

    if (node->exact) {
        ngx_http_keyauth_redact_location(pool, node->exact);
    }

    if (node->inclusive) {
        ngx_http_keyauth_redact_location(pool, node->inclusive);
    }

    ngx_http_keyauth_redact_tree(pool, node->left);
    ngx_http_keyauth_redact_tree(pool, node->right);
    ngx_http_keyauth_redact_tree(pool, node->tree);
}


static void
ngx_http_keyauth_redact_location(ngx_pool_t *pool,
    ngx_http_core_loc_conf_t *clcf)
{
    ngx_http_core_loc_conf_t  *lx;

#if (NGX_PCRE)
    ngx_http_core_loc_conf_t  **clcfp;
#endif

    ngx_http_keyauth_redact_chain(pool, clcf->error_log);

    ngx_http_keyauth_redact_tree(pool, clcf->static_locations);

#if (NGX_PCRE)
    if (clcf->regex_locations) {
        for (clcfp = clcf->regex_locations; *clcfp; clcfp++) {
            ngx_http_keyauth_redact_location(pool, *clcfp);
        }
    }
#endif

    if (clcf->limit_except_loc_conf) {
        lx = clcf->limit_except_loc_conf[ngx_http_core_module.ctx_index];
        if (lx != clcf) {
            ngx_http_keyauth_redact_chain(pool, lx->error_log);
        }
    }
}


void
ngx_http_keyauth_redact_logs(ngx_conf_t *cf)
{
    ngx_uint_t                  s;
    ngx_http_core_srv_conf_t  **cscfp;
    ngx_http_core_loc_conf_t   *clcf, **named;
    ngx_http_core_main_conf_t  *cmcf;

    ngx_http_keyauth_redact_chain(cf->pool, &cf->cycle->new_log);

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);
    cscfp = cmcf->servers.elts;

    for (s = 0; s < cmcf->servers.nelts; s++) {
        clcf = cscfp[s]->ctx->loc_conf[ngx_http_core_module.ctx_index];
        ngx_http_keyauth_redact_location(cf->pool, clcf);

        if (cscfp[s]->named_locations) {
            for (named = cscfp[s]->named_locations; *named; named++) {
                ngx_http_keyauth_redact_location(cf->pool, *named);
            }
        }
    }
}
