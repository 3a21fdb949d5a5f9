#include "ngx_http_keyauth_log.h"
#include "core/keyauth_core.h"


/*
 * Access logs. ngx_http_log_module builds each line from its format's
 * operations into one buffer and writes it with no hook in between, and its
 * types are private to its source file. So every format gets two operations
 * of ours: the first notes where the line starts, the last masks the whole
 * line in place, before nginx writes it, buffers it, compresses it or sends
 * it to syslog. Every variable of the line is covered, whatever it is and
 * however it was escaped, and a secret spread over two variables too.
 *
 * The types below mirror ngx_http_log_module.c's (the same from nginx 1.4
 * to 1.31.2; 1.31.3 added an argument to "run"); the element sizes nginx
 * recorded in its arrays are checked when the configuration is read.
 */

#if (nginx_version >= 1031003)
#error "ngx_http_log_module's operations changed in nginx 1.31.3: update the mirrored types"
#endif

typedef struct ngx_http_keyauth_log_op_s  ngx_http_keyauth_log_op_t;

typedef u_char *(*ngx_http_keyauth_log_op_run_pt)(ngx_http_request_t *r,
    u_char *buf, ngx_http_keyauth_log_op_t *op);

typedef size_t (*ngx_http_keyauth_log_op_getlen_pt)(ngx_http_request_t *r,
    uintptr_t data);

struct ngx_http_keyauth_log_op_s {
    size_t                              len;
    ngx_http_keyauth_log_op_getlen_pt   getlen;
    ngx_http_keyauth_log_op_run_pt      run;
    uintptr_t                           data;
};

typedef struct {
    ngx_str_t                           name;
    ngx_array_t                        *flushes;
    ngx_array_t                        *ops;
} ngx_http_keyauth_log_fmt_t;

typedef struct {
    ngx_array_t                         formats;
    ngx_uint_t                          combined_used;
} ngx_http_keyauth_log_main_conf_t;


extern ngx_module_t  ngx_http_log_module;


/* the line being built: nginx runs a format's operations one after the
 * other, with nothing in between that could log to an access log */
static u_char  *ngx_http_keyauth_access_line;


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
static ngx_int_t ngx_http_keyauth_redact_access_logs(ngx_conf_t *cf);
static size_t ngx_http_keyauth_access_getlen(ngx_http_request_t *r,
    uintptr_t data);
static u_char *ngx_http_keyauth_access_start(ngx_http_request_t *r,
    u_char *buf, ngx_http_keyauth_log_op_t *op);
static u_char *ngx_http_keyauth_access_end(ngx_http_request_t *r,
    u_char *buf, ngx_http_keyauth_log_op_t *op);


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


ngx_int_t
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

    return ngx_http_keyauth_redact_access_logs(cf);
}


static ngx_int_t
ngx_http_keyauth_redact_access_logs(ngx_conf_t *cf)
{
    ngx_uint_t                         i, n;
    ngx_array_t                       *ops;
    ngx_http_keyauth_log_op_t         *op;
    ngx_http_keyauth_log_fmt_t        *fmt;
    ngx_http_keyauth_log_main_conf_t  *lmcf;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_log_module);
    fmt = lmcf->formats.elts;

    /* nginx puts "combined" first, with an array of its own operations */
    if (lmcf->formats.size != sizeof(ngx_http_keyauth_log_fmt_t)
        || lmcf->formats.nelts == 0
        || fmt[0].name.len != sizeof("combined") - 1
        || ngx_strncmp(fmt[0].name.data, "combined", fmt[0].name.len) != 0)
    {
        goto unknown;
    }

    for (i = 0; i < lmcf->formats.nelts; i++) {
        ops = fmt[i].ops;

        if (ops == NULL || ops->size != sizeof(ngx_http_keyauth_log_op_t)) {
            goto unknown;
        }

        n = ops->nelts;

        if (n == 0) {
            continue;   /* "combined" when no log uses it */
        }

        if (ngx_array_push_n(ops, 2) == NULL) {
            return NGX_ERROR;
        }

        op = ops->elts;
        ngx_memmove(&op[1], &op[0], n * sizeof(ngx_http_keyauth_log_op_t));

        op[0].len = 0;
        op[0].getlen = ngx_http_keyauth_access_getlen;
        op[0].run = ngx_http_keyauth_access_start;
        op[0].data = 0;

        op[n + 1] = op[0];
        op[n + 1].run = ngx_http_keyauth_access_end;
    }

    return NGX_OK;

unknown:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "keyauth cannot mask the access logs of this nginx: "
                       "ngx_http_log_module's formats are not laid out "
                       "as in nginx %s", NGINX_VERSION);
    return NGX_ERROR;
}


static size_t
ngx_http_keyauth_access_getlen(ngx_http_request_t *r, uintptr_t data)
{
    return 0;
}


static u_char *
ngx_http_keyauth_access_start(ngx_http_request_t *r, u_char *buf,
    ngx_http_keyauth_log_op_t *op)
{
    ngx_http_keyauth_access_line = buf;

    return buf;
}


static u_char *
ngx_http_keyauth_access_end(ngx_http_request_t *r, u_char *buf,
    ngx_http_keyauth_log_op_t *op)
{
    u_char  *line;

    line = ngx_http_keyauth_access_line;
    ngx_http_keyauth_access_line = NULL;

    if (line != NULL && line <= buf) {
        (void) ka_redact_secrets((char *) line, buf - line);
    }

    return buf;
}
