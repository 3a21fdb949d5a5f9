/*
 * The keyauth_shared_limits directive: the Redis address (resolved at
 * configuration time, as an upstream server's is) and the exchange's
 * options. The exchange itself is ngx_http_keyauth_shared.c.
 */
#include "ngx_http_keyauth_shared.h"


#define NGX_HTTP_KEYAUTH_SHARED_INTERVAL   250
#define NGX_HTTP_KEYAUTH_SHARED_TIMEOUT    1000


static ngx_int_t ngx_http_keyauth_shared_option(ngx_conf_t *cf,
    ngx_http_keyauth_shared_conf_t *scf, ngx_str_t *v);
static char *ngx_http_keyauth_shared_url(ngx_conf_t *cf,
    ngx_http_keyauth_shared_conf_t *scf, ngx_str_t *v);


char *
ngx_http_keyauth_shared_limits(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    char                            *rv;
    ngx_str_t                       *value;
    ngx_uint_t                       i;
    ngx_http_keyauth_shared_conf_t  *scf;

    if (kmcf->shared) {
        return "is duplicate";
    }

    scf = ngx_pcalloc(cf->pool, sizeof(ngx_http_keyauth_shared_conf_t));
    if (scf == NULL) {
        return NGX_CONF_ERROR;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     scf->user = { 0, NULL };
     *     scf->password = { 0, NULL };
     */

    scf->interval = NGX_CONF_UNSET_MSEC;
    scf->timeout = NGX_CONF_UNSET_MSEC;
    ngx_str_set(&scf->stream, "keyauth:spent");

    value = cf->args->elts;

    rv = ngx_http_keyauth_shared_url(cf, scf, &value[1]);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    for (i = 2; i < cf->args->nelts; i++) {
        if (ngx_http_keyauth_shared_option(cf, scf, &value[i]) != NGX_OK) {
            return NGX_CONF_ERROR;
        }
    }

    ngx_conf_init_msec_value(scf->interval, NGX_HTTP_KEYAUTH_SHARED_INTERVAL);
    ngx_conf_init_msec_value(scf->timeout, NGX_HTTP_KEYAUTH_SHARED_TIMEOUT);

    kmcf->shared = scf;

    return NGX_CONF_OK;
}


/* redis://[[user]:password@]host[:port]: the host is resolved now, as an
 * upstream server's is; what would select a database or TLS is refused
 * rather than ignored. */
static char *
ngx_http_keyauth_shared_url(ngx_conf_t *cf,
    ngx_http_keyauth_shared_conf_t *scf, ngx_str_t *v)
{
    u_char     *at, *colon, *host, *end;
    ngx_url_t   u;

    static ngx_str_t  scheme = ngx_string("redis://");

    if (v->len <= scheme.len
        || ngx_strncmp(v->data, scheme.data, scheme.len) != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_shared_limits\" address: "
                           "expected redis://[[user]:password@]host[:port]");
        return NGX_CONF_ERROR;
    }

    host = v->data + scheme.len;
    end = v->data + v->len;

    /* the last '@': a password may hold one */
    at = NULL;
    for (colon = host; colon < end; colon++) {
        if (*colon == '@') {
            at = colon;
        }
    }

    if (at) {
        colon = ngx_strlchr(host, at, ':');
        if (colon == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"keyauth_shared_limits\" address: "
                               "the part before '@' must be "
                               "[user]:password");
            return NGX_CONF_ERROR;
        }

        scf->user.data = host;
        scf->user.len = colon - host;
        scf->password.data = colon + 1;
        scf->password.len = at - colon - 1;
        host = at + 1;

        if (scf->password.len == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"keyauth_shared_limits\" address: "
                               "empty password");
            return NGX_CONF_ERROR;
        }
    }

    if (ngx_strlchr(host, end, '/') || ngx_strlchr(host, end, '?')) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_shared_limits\" address: "
                           "no path or database number after host:port "
                           "(the stream's name is the key= parameter)");
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&u, sizeof(ngx_url_t));

    u.url.data = host;
    u.url.len = end - host;
    u.default_port = 6379;
    u.no_resolve = 0;

    if (ngx_parse_url(cf->pool, &u) != NGX_OK || u.naddrs == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_shared_limits\" address "
                           "\"%V\": %s", &u.url,
                           u.err ? u.err : "host not found");
        return NGX_CONF_ERROR;
    }

    scf->addr = &u.addrs[0];

    scf->url.len = scheme.len + scf->addr->name.len;
    scf->url.data = ngx_pnalloc(cf->pool, scf->url.len);
    if (scf->url.data == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_sprintf(scf->url.data, "%V%V", &scheme, &scf->addr->name);

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_keyauth_shared_option(ngx_conf_t *cf,
    ngx_http_keyauth_shared_conf_t *scf, ngx_str_t *v)
{
    ngx_str_t    s;
    ngx_msec_t  *target, min, max;

    if (ngx_strncmp(v->data, "key=", 4) == 0) {
        s.data = v->data + 4;
        s.len = v->len - 4;

        if (s.len == 0 || s.len > 256) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid \"keyauth_shared_limits\" "
                               "parameter \"%V\": 1 to 256 bytes", v);
            return NGX_ERROR;
        }

        scf->stream = s;
        return NGX_OK;
    }

    if (ngx_strncmp(v->data, "interval=", 9) == 0) {
        s.data = v->data + 9;
        s.len = v->len - 9;
        target = &scf->interval;
        min = 50;
        max = 5000;

    } else if (ngx_strncmp(v->data, "timeout=", 8) == 0) {
        s.data = v->data + 8;
        s.len = v->len - 8;
        target = &scf->timeout;
        min = 100;
        max = 30000;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_shared_limits\" parameter "
                           "\"%V\": expected interval=, timeout= or key=", v);
        return NGX_ERROR;
    }

    if (*target != NGX_CONF_UNSET_MSEC) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "duplicate \"keyauth_shared_limits\" parameter "
                           "\"%V\"", v);
        return NGX_ERROR;
    }

    *target = ngx_parse_time(&s, 0);

    if (*target == (ngx_msec_t) NGX_ERROR || *target < min || *target > max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid \"keyauth_shared_limits\" parameter "
                           "\"%V\": expected %Mms to %Mms", v, min, max);
        return NGX_ERROR;
    }

    return NGX_OK;
}
