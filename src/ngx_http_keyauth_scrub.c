/*
 * A finished request's bytes stay in worker memory until something happens
 * to overwrite them: nginx parses headers in place and keeps the buffers of
 * an idle keep-alive connection, and freed pool memory is not cleared. A core
 * dump of the worker would then carry every API key and console token it has
 * seen. So when a request that carried an Authorization header ends (its pool
 * is destroyed), the header bytes it consumed, the request nginx built for
 * the upstream and the upstream's unbuffered answer are zeroed. The request
 * in flight at the moment of a dump is in memory, necessarily.
 */

#include "ngx_http_keyauth_scrub.h"


static ngx_int_t ngx_http_keyauth_scrub_handler(ngx_http_request_t *r);
static void ngx_http_keyauth_scrub(void *data);
static void ngx_http_keyauth_scrub_header_values(ngx_http_request_t *r);
static void ngx_http_keyauth_scrub_header_buffers(ngx_http_request_t *r);
static void ngx_http_keyauth_scrub_chain(ngx_chain_t *cl, ngx_buf_t *skip,
    ngx_uint_t whole);
static void ngx_http_keyauth_scrub_registers(void);


static ngx_str_t  ngx_http_keyauth_authorization = ngx_string("Authorization");


ngx_int_t
ngx_http_keyauth_scrub_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt        *h;
    ngx_http_core_main_conf_t  *cmcf;

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    /* post-read runs once per request, before any redirect */
    h = ngx_array_push(&cmcf->phases[NGX_HTTP_POST_READ_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_keyauth_scrub_handler;

    return NGX_OK;
}


static ngx_int_t
ngx_http_keyauth_scrub_handler(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t  *cln;

    if (r->headers_in.authorization == NULL) {
        return NGX_DECLINED;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    cln->handler = ngx_http_keyauth_scrub;
    cln->data = r;

    return NGX_DECLINED;
}


static void
ngx_http_keyauth_scrub(void *data)
{
    ngx_http_request_t *r = data;

    ngx_http_upstream_t  *u;

    if (r->stream == NULL) {
        ngx_http_keyauth_scrub_header_buffers(r);

    } else {
        ngx_http_keyauth_scrub_header_values(r);
    }

    u = r->upstream;

    if (u) {
        /* the data only: a request body buffer that points into the header
         * buffer ends where a pipelined request may begin. An unbuffered
         * body (proxy_request_buffering off, grpc) is different: nginx frees
         * the chain links as it sends them, so the chain is not ours to walk */
        if (!r->request_body_no_buffering) {
            ngx_http_keyauth_scrub_chain(u->request_bufs, NULL, 0);
        }

        /* the upstream's answer when it is not buffered (the console API's,
         * which carries new secrets); with buffering on, the event pipe may
         * have freed this buffer already */
        if (!u->buffering && u->buffer.temporary && u->buffer.start != NULL) {
            ngx_explicit_memzero(u->buffer.start,
                                 u->buffer.end - u->buffer.start);
        }
    }

    ngx_http_keyauth_scrub_registers();
}


/*
 * HTTP/2: the values were decoded into the stream's pool; only the
 * Authorization ones are wiped (over HTTP/1.x the buffers hold the values,
 * and a value set by configuration must not be touched).
 */
static void
ngx_http_keyauth_scrub_header_values(ngx_http_request_t *r)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &r->headers_in.headers.part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                break;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == ngx_http_keyauth_authorization.len
            && ngx_strncasecmp(h[i].key.data,
                               ngx_http_keyauth_authorization.data,
                               h[i].key.len) == 0)
        {
            ngx_explicit_memzero(h[i].value.data, h[i].value.len);
        }
    }
}


/*
 * HTTP/1.x: the current header buffer up to what was consumed (the rest may
 * already hold a pipelined request), and wholly every other header buffer of
 * the connection: a request too large for one buffer leaves a partial copy
 * behind in the one it outgrew.
 */
static void
ngx_http_keyauth_scrub_header_buffers(ngx_http_request_t *r)
{
    ngx_buf_t              *b, *first;
    ngx_http_connection_t  *hc;

    b = r->header_in;

    if (b != NULL && b->start != NULL && b->pos != NULL) {
        ngx_explicit_memzero(b->start, b->pos - b->start);
    }

    /* pos == NULL marks a c->buffer that keep-alive has freed */
    first = r->connection->buffer;

    if (first != NULL && first != b && first->start != NULL
        && first->pos != NULL)
    {
        ngx_explicit_memzero(first->start, first->end - first->start);
    }

    hc = r->http_connection;

    if (hc != NULL) {
        ngx_http_keyauth_scrub_chain(hc->busy, b, 1);
        ngx_http_keyauth_scrub_chain(hc->free, b, 1);
    }
}


/* Writable in-memory buffers only, never a file buffer nor read-only memory
 * such as a static string: up to the end of the buffer (whole) or of its
 * data. */
static void
ngx_http_keyauth_scrub_chain(ngx_chain_t *cl, ngx_buf_t *skip,
    ngx_uint_t whole)
{
    ngx_buf_t  *b;

    for ( /* void */ ; cl; cl = cl->next) {
        b = cl->buf;

        if (b == NULL || b == skip || !b->temporary || b->start == NULL) {
            continue;
        }

        ngx_explicit_memzero(b->start, (whole ? b->end : b->last) - b->start);
    }
}


/*
 * glibc's vector memcpy leaves the last bytes it copied in vector registers,
 * and a core file records the registers: the tail of the Authorization value
 * nginx last copied for an upstream, say. A copy of zeros long enough to take
 * its widest path (eight vectors) overwrites them.
 */
static void
ngx_http_keyauth_scrub_registers(void)
{
    u_char                      sink[256];
    static const u_char         zeros[256];
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;

    copy(sink, zeros, sizeof(sink));
}
