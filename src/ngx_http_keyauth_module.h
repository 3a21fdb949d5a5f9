/*
 * Types shared by the files of ngx_http_keyauth_module.
 */
#ifndef NGX_HTTP_KEYAUTH_MODULE_H
#define NGX_HTTP_KEYAUTH_MODULE_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "core/keyauth_core.h"


/* The monotonic clock of the rate and usage tables, in nanoseconds: nginx's
 * cached time (CLOCK_MONOTONIC, updated once an event loop turn), as
 * limit_req reads it. A request costs no clock_gettime, and every process
 * reads the same clock, a millisecond at a time. */
#define ngx_http_keyauth_now_ns()  ((uint64_t) ngx_current_msec * 1000000)


/* keyauth_shared_limits, as its directive parsed it
 * (ngx_http_keyauth_shared_conf.c) for its exchange. */
typedef struct {
    ngx_str_t                 url;        /* redis://host:port, for logs:
                                             never the password */
    ngx_addr_t               *addr;
    ngx_str_t                 user;
    ngx_str_t                 password;
    ngx_str_t                 stream;     /* the Redis key */
    ngx_msec_t                interval;
    ngx_msec_t                timeout;
} ngx_http_keyauth_shared_conf_t;


/* What keyauth_status counts; the access handler maps each of the core's
 * verdicts to one of them (ngx_http_keyauth_outcome), and the names in
 * ngx_http_keyauth_status.c follow this order. */
typedef enum {
    NGX_HTTP_KEYAUTH_OK = 0,
    NGX_HTTP_KEYAUTH_KEY_REQUIRED,
    NGX_HTTP_KEYAUTH_KEY_INVALID,
    NGX_HTTP_KEYAUTH_SCOPE_MISSING,
    NGX_HTTP_KEYAUTH_UNAVAILABLE,
    NGX_HTTP_KEYAUTH_RATE_LIMITED,
    NGX_HTTP_KEYAUTH_ACCOUNT_SUSPENDED,
    NGX_HTTP_KEYAUTH_QUOTA_EXCEEDED,
    NGX_HTTP_KEYAUTH_IP_NOT_ALLOWED,
    NGX_HTTP_KEYAUTH_OUTCOMES
} ngx_http_keyauth_outcome_e;


typedef struct {
    ngx_str_t                 db_path;     /* NUL-terminated */
    ngx_shm_zone_t           *shm_zone;    /* keyauth_zone: rates and usage */
    ngx_shm_zone_t           *stats_zone;  /* outcome counters */
    ngx_str_t                *db_needed_by; /* a directive that reads the store */
    ngx_str_t                 usage_db;    /* NUL-terminated; unset: db_path
                                              ".usage"; len 0: off */
    ngx_msec_t                usage_interval;
    ngx_uint_t                usage_days;  /* keyauth_usage_history, days */
    ngx_http_keyauth_shared_conf_t *shared; /* keyauth_shared_limits */
    ngx_str_t                 quota_dir;   /* NUL-terminated: the ledger's */
    size_t                    quota_size;  /* keyauth_quota_size */
} ngx_http_keyauth_main_conf_t;


/* The exchange of keyauth_shared_limits, as keyauth_status shows it. */
typedef struct {
    ngx_atomic_t              up;          /* the last exchange worked */
    ngx_atomic_t              exchanges;
    ngx_atomic_t              failures;
    ngx_atomic_t              published;   /* key counts sent */
    ngx_atomic_t              folded;      /* other edges' key counts charged */
    ngx_atomic_t              unplaced;    /* ... not charged: zone too small */
    ngx_atomic_t              bad_entries;
    ngx_atomic_t              capped;      /* keys charged the bound, not all
                                              their entries said */
    ngx_atomic_t              resyncs;     /* stream ids went backwards */
    ngx_atomic_t              bytes_sent;
    ngx_atomic_t              bytes_received;
} ngx_http_keyauth_shared_stats_t;


/* What keyauth_zone holds (its slab pool's data): the rate table, the usage
 * table, counters of the usage collection, and this edge's id and counters
 * for keyauth_shared_limits (the id lives as long as the zone: a reload
 * keeps it, so the edge does not read its own entries as another's). */
typedef struct {
    void                     *rate;
    void                     *usage;
    ngx_atomic_t              usage_flush_errors;
    ngx_atomic_t              usage_collections;      /* walks completed */
    ngx_atomic_t              usage_collection_parts; /* transactions */
    uint64_t                  edge_id;
    ngx_http_keyauth_shared_stats_t  shared;
} ngx_http_keyauth_zone_t;


typedef struct {
    ngx_flag_t                enable;
    ngx_array_t              *scopes;      /* of ka_str_t */
    ngx_uint_t                cost;        /* keyauth_cost: units a call */
    ngx_str_t                 cost_header; /* keyauth_cost_header; len 0: none */
} ngx_http_keyauth_loc_conf_t;


typedef struct {
    ka_auth_result_t          auth;
    ka_rate_result_t          rate;
    ka_quota_result_t         quota;
    /* the location's cost (what a metered call is charged when its
     * upstream reports none) and keyauth_cost_header, kept for the header
     * filter, which may run in another location */
    uint64_t                  cost;
    ngx_str_t                *cost_header;
    /* what a metered call had charged at its admission, until settled */
    uint64_t                  reserved;
    /* the cost header of a location an admitted call was redirected into:
     * never sent, never charged */
    ngx_str_t                *strip_header;
    ngx_uint_t                outcome;   /* ngx_http_keyauth_outcome_e */
    /* set once the call was let through (and charged): an internal
     * redirect (error_page, try_files) authenticates again for the new
     * location's scopes but does not charge again; a refused call is
     * checked again wherever its refusal is redirected */
    unsigned                  admitted:1;
    unsigned                  rate_checked:1;
    unsigned                  quota_checked:1;
    /* a metered call: charged when the upstream's answer arrives */
    unsigned                  quota_pending:1;
    /* the $keyauth_* values, formatted on first use: a log format or
     * proxy_set_header may read them many times */
    unsigned                  key_id_text_set:1;
    unsigned                  account_id_text_set:1;
    u_char                    key_id_text[KA_ID_TEXT_LEN];
    u_char                    account_id_text[KA_ID_TEXT_LEN];
    u_char                    remaining_text[NGX_INT32_LEN];
    size_t                    remaining_len;      /* 0: not yet formatted */
    u_char                    quota_text[NGX_INT64_LEN];
    size_t                    quota_len;          /* 0: not yet formatted */
    /* the key's name and meta, its account's meta and plan id: read from
     * the store on the first use of a variable that shows one (NULL: not
     * yet, or not to be had) */
    ka_key_details_t         *details;
    unsigned                  details_read:1;
} ngx_http_keyauth_ctx_t;


extern ngx_module_t  ngx_http_keyauth_module;


/* The request's keyauth context, found again after an internal redirect
 * (which clears module contexts) through its pool cleanup entry; NULL if the
 * access handler has not run. */
ngx_http_keyauth_ctx_t *ngx_http_keyauth_get_ctx(ngx_http_request_t *r);

/* A path argument (keyauth_db, keyauth_usage_db) made absolute and
 * NUL-terminated into out; an empty one is refused naming the directive. */
char *ngx_http_keyauth_conf_path(ngx_conf_t *cf, ngx_str_t *path,
    ngx_str_t *out);


#endif /* NGX_HTTP_KEYAUTH_MODULE_H */
