/*
 * Keeps secrets out of the logs. nginx logs request headers itself (all of
 * them at debug level, a duplicate Authorization header at info level),
 * before any module sees the request, and cuts error-log lines at 2 KiB
 * wherever that falls; so the module puts a writer that masks API keys and
 * console tokens in front of every error log of the configuration (files,
 * and syslog or memory logs behind their own writer), and masks every
 * access-log line once ngx_http_log_module has built it. The masking keeps a
 * secret's 12-character prefix, whatever part of the secret a line holds.
 * Fails (NGX_ERROR, with an emerg line) only if nginx's access-log module is
 * not laid out as this code expects.
 */
#ifndef NGX_HTTP_KEYAUTH_LOG_H
#define NGX_HTTP_KEYAUTH_LOG_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

ngx_int_t ngx_http_keyauth_redact_logs(ngx_conf_t *cf);

#endif /* NGX_HTTP_KEYAUTH_LOG_H */
