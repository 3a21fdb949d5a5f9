/*
 * The key store handle of a worker process: opened in init_process (never in
 * the master: LMDB handles do not survive fork), reopened when the store's
 * files were replaced, closed in exit_process.
 */
#ifndef NGX_HTTP_KEYAUTH_STORE_H
#define NGX_HTTP_KEYAUTH_STORE_H

#include "ngx_http_keyauth_module.h"

/* The module's init_process and exit_process. */
ngx_int_t ngx_http_keyauth_store_init_process(ngx_cycle_t *cycle);
void ngx_http_keyauth_store_exit_process(ngx_cycle_t *cycle);

/* This worker's store handle (opened lazily, retried at most once a
 * second); NULL while the store cannot be opened. */
ka_edge_t *ngx_http_keyauth_edge(ngx_log_t *log);

#endif /* NGX_HTTP_KEYAUTH_STORE_H */
