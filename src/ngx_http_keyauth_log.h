/*
 * Keeps secrets out of the error logs. nginx logs request headers itself
 * (all of them at debug level, a duplicate Authorization header at info
 * level), before any module sees the request; so the module puts a writer
 * that masks API keys and console tokens in front of every error log of the
 * configuration (files, and syslog or memory logs behind their own writer).
 */
#ifndef NGX_HTTP_KEYAUTH_LOG_H
#define NGX_HTTP_KEYAUTH_LOG_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

void ngx_http_keyauth_redact_logs(ngx_conf_t *cf);

#endif /* NGX_HTTP_KEYAUTH_LOG_H */
