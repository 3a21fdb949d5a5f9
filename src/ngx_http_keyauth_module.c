/*
 * keyauth: Bearer API key authentication in the access phase.
 *
 * The glue only translates between nginx and the C++ core (keyauth_core.h):
 * configuration, the access handler and its JSON error responses. The
 * per-worker LMDB handle is ngx_http_keyauth_store.c, the $keyauth_*
 * variables ngx_http_keyauth_variables.c.
 */

#include "ngx_http_keyauth_module.h"
#include "ngx_http_keyauth_decide.h"
#include "ngx_http_keyauth_ip.h"
#include "ngx_http_keyauth_json.h"
#include "ngx_http_keyauth_log.h"
#include "ngx_http_keyauth_plans.h"
#include "ngx_http_keyauth_quota.h"
#include "ngx_http_keyauth_quota_ledger.h"
#include "ngx_http_keyauth_rate.h"
#include "ngx_http_keyauth_scrub.h"
#include "ngx_http_keyauth_shared.h"
#include "ngx_http_keyauth_status.h"
#include "ngx_http_keyauth_store.h"
#include "ngx_http_keyauth_usage.h"
#include "ngx_http_keyauth_variables.h"
#include "ngx_http_keyauth_verify.h"


static ngx_int_t ngx_http_keyauth_handler(ngx_http_request_t *r);
static void ngx_http_keyauth_cleanup(void *data);
static ngx_int_t ngx_http_keyauth_outcome(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_loc_conf_t *klcf,
    ngx_http_keyauth_ctx_t *ctx);
static ngx_int_t ngx_http_keyauth_reject(ngx_http_request_t *r,
    ngx_uint_t status, ngx_str_t *code, ngx_str_t *message,
    ngx_str_t *challenge);
static char *ngx_http_keyauth_db(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_keyauth_content(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_keyauth_scope(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static void *ngx_http_keyauth_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_keyauth_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_keyauth_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);
static ngx_int_t ngx_http_keyauth_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_keyauth_init_process(ngx_cycle_t *cycle);
static void ngx_http_keyauth_exit_process(ngx_cycle_t *cycle);


/* The content handlers' directives: which handler, whether it reads the
 * store (so needs keyauth_db), and whether it routes by the location's
 * prefix (so needs a prefix or exact-match location to take it from). */
typedef struct {
    ngx_http_handler_pt       handler;
    ngx_uint_t                needs_db;
    ngx_uint_t                needs_prefix;
} ngx_http_keyauth_content_t;

static ngx_http_keyauth_content_t  ngx_http_keyauth_plans_content =
    { ngx_http_keyauth_plans_handler, 1, 1 };
static ngx_http_keyauth_content_t  ngx_http_keyauth_ip_content =
    { ngx_http_keyauth_ip_handler, 0, 0 };
static ngx_http_keyauth_content_t  ngx_http_keyauth_status_content =
    { ngx_http_keyauth_status_handler, 1, 0 };
static ngx_http_keyauth_content_t  ngx_http_keyauth_verify_content =
    { ngx_http_keyauth_verify_handler, 1, 0 };


static ngx_command_t  ngx_http_keyauth_commands[] = {

    { ngx_string("keyauth_db"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_db,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_zone"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_zone,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_usage_db"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_usage_db,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_usage_interval"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_usage_interval,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_usage_history"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_usage_history,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_quota_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_quota_size,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_shared_limits"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1234,
      ngx_http_keyauth_shared_limits,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_plans"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_keyauth_content,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      &ngx_http_keyauth_plans_content },

    { ngx_string("ip_lookup"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_keyauth_content,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      &ngx_http_keyauth_ip_content },

    { ngx_string("keyauth_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_keyauth_content,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      &ngx_http_keyauth_status_content },

    { ngx_string("keyauth_verify"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_keyauth_content,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      &ngx_http_keyauth_verify_content },

    { ngx_string("keyauth"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_keyauth_loc_conf_t, enable),
      NULL },

    { ngx_string("keyauth_scope"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_1MORE,
      ngx_http_keyauth_scope,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("keyauth_cost"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_cost,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_keyauth_loc_conf_t, cost),
      NULL },

    { ngx_string("keyauth_cost_header"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_keyauth_cost_header,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_keyauth_loc_conf_t, cost_header),
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_keyauth_module_ctx = {
    ngx_http_keyauth_add_variables,        /* preconfiguration */
    ngx_http_keyauth_init,                 /* postconfiguration */

    ngx_http_keyauth_create_main_conf,     /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_keyauth_create_loc_conf,      /* create location configuration */
    ngx_http_keyauth_merge_loc_conf        /* merge location configuration */
};


ngx_module_t  ngx_http_keyauth_module = {
    NGX_MODULE_V1,
    &ngx_http_keyauth_module_ctx,          /* module context */
    ngx_http_keyauth_commands,             /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_keyauth_init_process,         /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_keyauth_exit_process,         /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_str_t  ngx_http_keyauth_www_authenticate =
    ngx_string("WWW-Authenticate");


static ngx_int_t
ngx_http_keyauth_handler(ngx_http_request_t *r)
{
    int64_t                       now_ms;
    ngx_str_t                    *value;
    ngx_time_t                   *tp;
    ngx_table_elt_t              *h;
    ngx_pool_cleanup_t            *cln;
    ngx_http_keyauth_ctx_t        *ctx;
    ngx_http_keyauth_loc_conf_t   *klcf;
    ngx_http_keyauth_main_conf_t  *kmcf;

    klcf = ngx_http_get_module_loc_conf(r, ngx_http_keyauth_module);

    /* an X-Accel-Redirect answer of an admitted metered call, in whatever
     * location it leads to: settled with the units it reported, before a
     * proxy_pass here replaces the upstream that sent them */
    if (r->internal && r->upstream
        && r->upstream->headers_in.x_accel_redirect)
    {
        ctx = ngx_http_keyauth_get_ctx(r);

        if (ctx != NULL) {
            ngx_http_keyauth_quota_settle_redirect(r, ctx);
        }
    }

    if (!klcf->enable) {
        return NGX_DECLINED;
    }

    kmcf = ngx_http_get_module_main_conf(r, ngx_http_keyauth_module);

    ctx = ngx_http_keyauth_get_ctx(r);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_keyauth_ctx_t));
        if (ctx == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        /*
         * set by ngx_pcalloc():
         *
         *     ctx->auth = { 0 };
         *     ctx->rate = { 0 };
         *     ctx->rate_checked = 0;
         */

        /* the cleanup entry finds ctx again after an internal redirect,
         * which clears module contexts (the realip module does the same) */
        cln = ngx_pool_cleanup_add(r->pool, 0);
        if (cln == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        cln->handler = ngx_http_keyauth_cleanup;
        cln->data = ctx;

        ngx_http_set_ctx(r, ctx, ngx_http_keyauth_module);
    }

    h = r->headers_in.authorization;
    value = h ? &h->value : NULL;

    tp = ngx_timeofday();
    now_ms = (int64_t) tp->sec * 1000 + tp->msec;

    /* again after an internal redirect: the variables follow the new answer */
    ctx->key_id_text_set = 0;
    ctx->account_id_text_set = 0;

    ka_edge_authenticate(ngx_http_keyauth_edge(r->connection->log),
                         value ? (const char *) value->data : NULL,
                         value ? value->len : 0,
                         r->connection->sockaddr,
                         klcf->scopes ? klcf->scopes->elts : NULL,
                         klcf->scopes ? klcf->scopes->nelts : 0,
                         now_ms, &ctx->auth);

    if (ctx->auth.log_level != KA_LOG_NONE) {
        ngx_http_keyauth_log_auth(r, &ctx->auth);
    }

    return ngx_http_keyauth_outcome(r, kmcf, klcf, ctx);
}


/*
 * Every verdict of the core and what it becomes: the counter keyauth_status
 * shows, and the HTTP answer (or the rate check, for an accepted key). A
 * verdict this glue does not know fails closed, as AUTH_UNAVAILABLE.
 */
static ngx_int_t
ngx_http_keyauth_outcome(ngx_http_request_t *r,
    ngx_http_keyauth_main_conf_t *kmcf, ngx_http_keyauth_loc_conf_t *klcf,
    ngx_http_keyauth_ctx_t *ctx)
{
    ka_str_t    *scope;
    ngx_str_t    code, message, challenge;
    ngx_uint_t   status;

    ngx_str_null(&challenge);

    switch (ctx->auth.verdict) {

    case KA_AUTH_OK:
        if (ctx->admitted) {
            /* charged before an internal redirect: once is enough, at the
             * cost of the location that admitted the call */
            ngx_http_keyauth_quota_redirected(r, ctx);
            return NGX_OK;
        }

        ctx->cost = klcf->cost;
        ctx->cost_header = klcf->cost_header.len ? &klcf->cost_header : NULL;

        /* quota (no charge), rate, then the charge: the verify API's
         * decision too; counted there, answered here */
        switch (ngx_http_keyauth_decide(r, kmcf, ctx)) {

        case NGX_HTTP_KEYAUTH_OK:
            return NGX_OK;

        case NGX_HTTP_KEYAUTH_RATE_LIMITED:
            return ngx_http_keyauth_rate_refuse(r, ctx);

        case NGX_HTTP_KEYAUTH_QUOTA_EXCEEDED:
            return ngx_http_keyauth_quota_refuse(r, ctx);

        default: /* NGX_HTTP_KEYAUTH_UNAVAILABLE: the ledger, logged */
            status = NGX_HTTP_SERVICE_UNAVAILABLE;
            ngx_str_set(&code, "AUTH_UNAVAILABLE");
            ngx_str_set(&message, "API key authentication is temporarily "
                                  "unavailable");
            return ngx_http_keyauth_reject(r, status, &code, &message,
                                           &challenge);
        }

    case KA_AUTH_KEY_REQUIRED:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_KEY_REQUIRED);
        status = NGX_HTTP_UNAUTHORIZED;
        ngx_str_set(&code, "API_KEY_REQUIRED");
        ngx_str_set(&message, "A Bearer API key is required");
        ngx_str_set(&challenge, "Bearer realm=\"api\"");
        break;

    case KA_AUTH_KEY_INVALID:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_KEY_INVALID);
        status = NGX_HTTP_UNAUTHORIZED;
        ngx_str_set(&code, "INVALID_API_KEY");
        ngx_str_set(&message, "The API key is invalid, revoked or expired");
        ngx_str_set(&challenge, "Bearer realm=\"api\", error=\"invalid_token\"");
        break;

    case KA_AUTH_SCOPE_MISSING:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_SCOPE_MISSING);
        status = NGX_HTTP_FORBIDDEN;
        ngx_str_set(&code, "INSUFFICIENT_SCOPE");

        scope = &ctx->auth.missing_scope;

        message.len = sizeof("The API key lacks the scope ") - 1 + scope->len;
        message.data = ngx_pnalloc(r->pool, message.len);

        challenge.len = sizeof("Bearer realm=\"api\", error=\"insufficient_scope\""
                               ", scope=\"\"") - 1
                        + scope->len;
        challenge.data = ngx_pnalloc(r->pool, challenge.len);

        if (message.data == NULL || challenge.data == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        ngx_sprintf(message.data, "The API key lacks the scope %*s",
                    scope->len, scope->data);
        ngx_sprintf(challenge.data, "Bearer realm=\"api\", "
                    "error=\"insufficient_scope\", scope=\"%*s\"",
                    scope->len, scope->data);
        break;

    case KA_AUTH_ACCOUNT_SUSPENDED:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_ACCOUNT_SUSPENDED);
        status = NGX_HTTP_FORBIDDEN;
        ngx_str_set(&code, "ACCOUNT_SUSPENDED");
        ngx_str_set(&message, "The account of this API key is suspended");
        break;

    case KA_AUTH_IP_NOT_ALLOWED:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_IP_NOT_ALLOWED);
        status = NGX_HTTP_FORBIDDEN;
        ngx_str_set(&code, "IP_NOT_ALLOWED");
        ngx_str_set(&message, "The API key may not be used from this address");
        break;

    default:
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "keyauth: the core returned verdict %d, which this "
                      "module does not know; refused with 503",
                      (int) ctx->auth.verdict);
        /* fall through */

    case KA_AUTH_UNAVAILABLE:
        ngx_http_keyauth_count(kmcf, NGX_HTTP_KEYAUTH_UNAVAILABLE);
        status = NGX_HTTP_SERVICE_UNAVAILABLE;
        ngx_str_set(&code, "AUTH_UNAVAILABLE");
        ngx_str_set(&message, "API key authentication is temporarily "
                              "unavailable");
        break;
    }

    return ngx_http_keyauth_reject(r, status, &code, &message, &challenge);
}


ngx_http_keyauth_ctx_t *
ngx_http_keyauth_get_ctx(ngx_http_request_t *r)
{
    ngx_pool_cleanup_t      *cln;
    ngx_http_keyauth_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_keyauth_module);

    if (ctx || !(r->internal || r->filter_finalize)) {
        return ctx;
    }

    for (cln = r->pool->cleanup; cln; cln = cln->next) {
        if (cln->handler == ngx_http_keyauth_cleanup) {
            ctx = cln->data;
            ngx_http_set_ctx(r, ctx, ngx_http_keyauth_module);
            return ctx;
        }
    }

    return NULL;
}


static void
ngx_http_keyauth_cleanup(void *data)
{
    /* nothing to free: the entry only marks where ctx lives */
}


static ngx_int_t
ngx_http_keyauth_reject(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *code, ngx_str_t *message, ngx_str_t *challenge)
{
    ngx_int_t                  rc;
    ngx_table_elt_t           *h;
    ngx_http_core_loc_conf_t  *clcf;

    if (challenge->len) {
        h = ngx_http_keyauth_add_header(r, &ngx_http_keyauth_www_authenticate,
                                        challenge);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }
        r->headers_out.www_authenticate = h;
    }

    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    if (clcf->satisfy != NGX_HTTP_SATISFY_ALL
        && status != NGX_HTTP_SERVICE_UNAVAILABLE)
    {
        /* "satisfy any": another access module may still let it through,
         * so leave the response to the access phase; an unavailable store
         * is refused whatever else could pass */
        return status;
    }

    rc = ngx_http_keyauth_send_error(r, status, code, message);
    ngx_http_finalize_request(r, rc);

    return NGX_DONE;
}


static char *
ngx_http_keyauth_db(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_main_conf_t  *kmcf = conf;

    ngx_str_t  *value, path;

    if (kmcf->db_path.data != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;
    path = value[1];

    return ngx_http_keyauth_conf_path(cf, &path, &kmcf->db_path);
}


/*
 * A directive's path argument made absolute (relative to the prefix) and
 * NUL-terminated for LMDB, which takes C strings.
 */
char *
ngx_http_keyauth_conf_path(ngx_conf_t *cf, ngx_str_t *path, ngx_str_t *out)
{
    ngx_str_t  *name;

    if (path->len == 0) {
        name = &((ngx_str_t *) cf->args->elts)[0];
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "empty path in \"%V\"", name);
        return NGX_CONF_ERROR;
    }

    if (ngx_conf_full_name(cf->cycle, path, 0) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    out->data = ngx_pnalloc(cf->pool, path->len + 1);
    if (out->data == NULL) {
        return NGX_CONF_ERROR;
    }

    out->len = path->len;
    ngx_cpystrn(out->data, path->data, path->len + 1);

    return NGX_CONF_OK;
}


static char *
ngx_http_keyauth_content(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_content_t    *content = cmd->post;
    ngx_http_core_loc_conf_t      *clcf;
    ngx_http_keyauth_main_conf_t  *kmcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);

    if (content->needs_prefix
        && (clcf->named || clcf->noname
#if (NGX_PCRE)
            || clcf->regex != NULL
#endif
           ))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" needs a prefix or exact-match location, "
                           "such as \"location /api/plans\": the paths it "
                           "answers are relative to that prefix", &cmd->name);
        return NGX_CONF_ERROR;
    }

    clcf->handler = content->handler;

    if (content->needs_db) {
        kmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_keyauth_module);
        kmcf->db_needed_by = &cmd->name;
    }

    return NGX_CONF_OK;
}


static char *
ngx_http_keyauth_scope(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_keyauth_loc_conf_t  *klcf = conf;

    ka_str_t    *scope;
    ngx_str_t   *value;
    ngx_uint_t   i;

    if (klcf->scopes != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    klcf->scopes = ngx_array_create(cf->pool, cf->args->nelts - 1,
                                    sizeof(ka_str_t));
    if (klcf->scopes == NULL) {
        return NGX_CONF_ERROR;
    }

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (!ka_required_scope_ok((const char *) value[i].data, value[i].len)) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid scope \"%V\" in \"keyauth_scope\": "
                               "expected <resource>:<action> of "
                               "[a-z0-9_.-], 1-31 characters each, "
                               "without \"*\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        scope = ngx_array_push(klcf->scopes);
        if (scope == NULL) {
            return NGX_CONF_ERROR;
        }

        scope->data = (const char *) value[i].data;
        scope->len = value[i].len;
    }

    return NGX_CONF_OK;
}


static void *
ngx_http_keyauth_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_keyauth_main_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_keyauth_main_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->db_path = { 0, NULL };
     *     conf->shm_zone = NULL;
     *     conf->stats_zone = NULL;
     *     conf->db_needed_by = NULL;
     *     conf->usage_db = { 0, NULL };
     *     conf->shared = NULL;
     */

    conf->usage_interval = NGX_CONF_UNSET_MSEC;
    conf->usage_days = NGX_CONF_UNSET_UINT;
    conf->quota_size = NGX_CONF_UNSET_SIZE;

    return conf;
}


static void *
ngx_http_keyauth_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_keyauth_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_keyauth_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    conf->enable = NGX_CONF_UNSET;
    conf->scopes = NGX_CONF_UNSET_PTR;
    conf->cost = NGX_CONF_UNSET_UINT;

    /*
     * set by ngx_pcalloc():
     *
     *     conf->cost_header = { 0, NULL };
     */

    return conf;
}


static char *
ngx_http_keyauth_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_keyauth_loc_conf_t  *prev = parent;
    ngx_http_keyauth_loc_conf_t  *conf = child;

    ngx_http_keyauth_main_conf_t  *kmcf;

    ngx_conf_merge_value(conf->enable, prev->enable, 0);
    ngx_conf_merge_ptr_value(conf->scopes, prev->scopes, NULL);
    ngx_conf_merge_uint_value(conf->cost, prev->cost, 1);
    ngx_conf_merge_str_value(conf->cost_header, prev->cost_header, "");

    /* the core module's configuration of this location is merged already */
    ngx_http_keyauth_verify_merge(
        ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module));

    if (conf->enable) {
        kmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_keyauth_module);

        if (kmcf->db_path.data == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"keyauth on\" needs \"keyauth_db\" "
                               "in the http block");
            return NGX_CONF_ERROR;
        }
    }

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_keyauth_init(ngx_conf_t *cf)
{
    ngx_http_handler_pt           *h;
    ngx_http_core_main_conf_t     *cmcf;
    ngx_http_keyauth_main_conf_t  *kmcf;

    kmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_keyauth_module);

    /* it shares the rate states of keyauth_zone: without them, nothing */
    if (kmcf->shared && (kmcf->shm_zone == NULL || kmcf->db_path.data == NULL))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"keyauth_shared_limits\" needs \"keyauth_db\" "
                           "and \"keyauth_zone\" in the http block");
        return NGX_ERROR;
    }

    if (kmcf->db_path.data == NULL) {
        if (kmcf->db_needed_by) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"%V\" needs \"keyauth_db\" in the http block",
                               kmcf->db_needed_by);
            return NGX_ERROR;
        }

        return NGX_OK;
    }

    if (ngx_http_keyauth_stats_zone(cf, kmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_usage_conf(cf, kmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_quota_conf(cf, kmcf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_redact_logs(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_scrub_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (kmcf->shm_zone == NULL) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "no \"keyauth_zone\": per-key rate limits "
                           "are not enforced and usage is not counted");
    }

    if (ngx_http_keyauth_rate_filter_init(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_ACCESS_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_keyauth_handler;

    h = ngx_array_push(&cmcf->phases[NGX_HTTP_LOG_PHASE].handlers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    *h = ngx_http_keyauth_quota_log;

    return NGX_OK;
}


static ngx_int_t
ngx_http_keyauth_init_process(ngx_cycle_t *cycle)
{
    if (ngx_http_keyauth_store_init_process(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_quota_init_process(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_keyauth_usage_init_process(cycle) != NGX_OK) {
        return NGX_ERROR;
    }

    return ngx_http_keyauth_shared_init_process(cycle);
}


static void
ngx_http_keyauth_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_keyauth_shared_exit_process(cycle);
    ngx_http_keyauth_usage_exit_process(cycle);
    ngx_http_keyauth_quota_exit_process(cycle);
    ngx_http_keyauth_store_exit_process(cycle);
}
