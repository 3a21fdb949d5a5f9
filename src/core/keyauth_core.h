/*
 * The C face of the keyauth core, the only header the nginx glue includes.
 * Everything behind it is C++17; no function here throws or allocates on
 * the request path, and no nginx type crosses it.
 */
#ifndef KEYAUTH_CORE_H
#define KEYAUTH_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>  /* struct sockaddr_storage */

#include "keyauth_schema.h"  /* the on-disk names the glue needs (KA_USAGE_DIR_SUFFIX) */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ka_edge_s ka_edge_t;  /* per-process: LMDB reader + hash context */

struct sockaddr;  /* the client's address: AF_INET or AF_INET6 */

typedef struct {
    const char *data;
    size_t      len;
} ka_str_t;

typedef enum {
    KA_AUTH_OK = 0,
    KA_AUTH_KEY_REQUIRED,     /* 401 API_KEY_REQUIRED */
    KA_AUTH_KEY_INVALID,      /* 401 INVALID_API_KEY */
    KA_AUTH_SCOPE_MISSING,    /* 403 INSUFFICIENT_SCOPE */
    KA_AUTH_UNAVAILABLE,      /* 503 AUTH_UNAVAILABLE: fail closed */
    KA_AUTH_ACCOUNT_SUSPENDED, /* 403 ACCOUNT_SUSPENDED */
    KA_AUTH_IP_NOT_ALLOWED     /* 403 IP_NOT_ALLOWED: outside allowedIps */
} ka_verdict_e;

typedef enum {
    KA_LOG_NONE = 0,
    KA_LOG_INFO,    /* the client's fault */
    KA_LOG_ERROR    /* ours: storage failure, corrupt or unknown record */
} ka_log_level_e;

#define KA_ID_TEXT_LEN     28   /* "key_" / "acc_" + 24 hex digits */
#define KA_PREFIX_TEXT_LEN 12
#define KA_REASON_LEN      192

typedef struct {
    ka_verdict_e   verdict;
    ka_log_level_e log_level;
    /* Why, for the error log. Never contains the secret. */
    char           reason[KA_REASON_LEN];
    /* Set once the key is well-formed (prefix) or found (ids, rates); ids
     * are binary, ka_format_*_id() writes their text only when needed. */
    size_t         prefix_len;
    char           prefix[KA_PREFIX_TEXT_LEN];
    int            found;
    unsigned char  key_id_bin[12];
    unsigned char  account_id_bin[12];
    /* Whose rate-limit state the key spends: its own id, or the first key
     * of its roll chain (a rolled key never starts a fresh limit). */
    unsigned char  rate_id_bin[12];
    uint32_t       requested_rpm;
    uint32_t       entitlement_rpm;   /* the account's effective rate */
    /* Quotas in force (enum ka_quota_period; KA_QUOTA_NONE: none): the
     * key's own (counted under rate_id_bin, so a roll chain shares it) and
     * its account's effective one (its plan's, or its own). */
    uint8_t        key_quota_period;
    uint8_t        account_quota_period;
    uint64_t       key_quota_units;
    uint64_t       account_quota_units;
    /* The first required scope the key lacks, for WWW-Authenticate. */
    ka_str_t       missing_scope;
    /* Once found: the scopes it grants, packed (u8 length, bytes) entries
     * (ka_auth_scopes_json renders them); valid until the next call. */
    ka_str_t       granted_scopes;
    uint8_t        granted_scope_count;
} ka_auth_result_t;

/* "key_..." / "acc_..." text of a binary id: KA_ID_TEXT_LEN bytes, no NUL. */
void ka_format_key_id(const unsigned char *bin, char *out);
void ka_format_account_id(const unsigned char *bin, char *out);

/* Opens the environment read-only. NULL on failure, with err filled. */
ka_edge_t *ka_edge_open(const char *path, char *err, size_t err_len);
void ka_edge_close(ka_edge_t *edge);

/* 1, with why filled, when the handle must be closed and the store opened
 * again (its files were replaced or removed, or its map was lost); else 0.
 * Two stat() calls: for a periodic check, not for every request. */
int ka_edge_stale(ka_edge_t *edge, char *why, size_t why_len);

/* Lets go of the worker's read snapshot if no request used it since the
 * previous call: for a timer every KA_EDGE_IDLE_MSEC, so that a snapshot an
 * idle worker holds pins the writer's old pages for at most twice that. */
#define KA_EDGE_IDLE_MSEC  500
void ka_edge_idle(ka_edge_t *edge);

/*
 * Checks an Authorization header value (header == NULL: no header) against
 * the store, the client's address (the key's and its account's allowedIps)
 * and the required scopes (all of them are required). client is read only
 * when a list is in force; NULL (not known) fits no list.
 */
void ka_edge_authenticate(ka_edge_t *edge, const char *header, size_t header_len,
    const struct sockaddr *client, const ka_str_t *scopes, size_t n_scopes,
    int64_t now_ms, ka_auth_result_t *out);

/* The same check of a key given as it is (the verify API's "key"), not in
 * an Authorization header; token == NULL or empty: KA_AUTH_KEY_REQUIRED. */
void ka_edge_check_key(ka_edge_t *edge, const char *token, size_t token_len,
    const struct sockaddr *client, const ka_str_t *scopes, size_t n_scopes,
    int64_t now_ms, ka_auth_result_t *out);

/*
 * The key's name and meta, its account's meta and plan id (each empty when
 * it has none), of the key an accepted check found (auth->found), read
 * afresh from the store by id and copied into buf, which
 * KA_KEY_DETAILS_MAX bytes always hold. 1 when read; 0 when the key or its
 * account is gone since, the store is of a schema without key records by
 * id, or buf is short. Off the request path: only for a variable that is
 * used, or a verify answer. No allocation.
 */
#define KA_KEY_DETAILS_MAX  (200 + 64 + 2 * 1024)  /* name, plan id, two metas */
typedef struct {
    ka_str_t  key_name;
    ka_str_t  key_meta;
    ka_str_t  plan_id;
    ka_str_t  account_meta;
} ka_key_details_t;

int ka_edge_key_details(ka_edge_t *edge, const ka_auth_result_t *auth,
    char *buf, size_t buf_len, ka_key_details_t *out);

/* A scope a location may require: "<resource>:<action>", no wildcard. */
int ka_required_scope_ok(const char *scope, size_t len);

/* ---- the verify API (keyauth_verify): its request body ---- */

#define KA_VERIFY_MAX_BODY    65536  /* bytes; a longer body is refused */
#define KA_VERIFY_MAX_SCOPES  32
#define KA_VERIFY_FIELD_LEN   40

typedef struct {
    ka_str_t      key;        /* a view into the body */
    ka_str_t      scopes[KA_VERIFY_MAX_SCOPES];  /* views into the body */
    size_t        n_scopes;
    uint64_t      cost;       /* units to charge: 1 when not given */
    /* "ip", as an address for ka_edge_check_key (sockaddr_in or
     * sockaddr_in6); client is NULL when the body has none, else it points
     * at ip in this very struct: use the struct where it was parsed, never
     * a copy of it */
    struct sockaddr_storage  ip;
    const struct sockaddr   *client;
    /* on failure: the field at fault ("body": the whole) and why, both
     * NUL-terminated ASCII without quotes or backslashes, never a byte of
     * the key */
    char          field[KA_VERIFY_FIELD_LEN];
    char          error[KA_REASON_LEN];
} ka_verify_request_t;

/* 1 when body (at most KA_VERIFY_MAX_BODY bytes) is a well-formed verify
 * request, filling out; 0 otherwise, with out->field and out->error set.
 * No allocation. */
int ka_verify_parse(const char *body, size_t len, ka_verify_request_t *out);

/* The scopes the key of an accepted check grants, as a JSON array, into
 * out; returns its length, or what it needs when out_len is too small
 * (out == NULL, out_len == 0: only the length). */
size_t ka_auth_scopes_json(const ka_auth_result_t *auth, char *out,
    size_t out_len);

/* ---- the public plan catalog ---- */

typedef enum {
    KA_PLANS_OK = 0,
    KA_PLANS_NOT_FOUND,     /* 404 PLAN_NOT_FOUND */
    KA_PLANS_NO_RATE,       /* 503 EXCHANGE_RATE_UNAVAILABLE */
    KA_PLANS_UNAVAILABLE    /* 503 CATALOG_UNAVAILABLE, reason says why */
} ka_plans_status_e;

typedef struct {
    ka_plans_status_e  status;
    ka_str_t           body;   /* JSON; valid until the next call: copy it */
    ka_str_t           etag;   /* quoted entity tag of this catalog and rate */
    char               reason[KA_REASON_LEN];
} ka_plans_result_t;

typedef enum {
    KA_PLANS_ROUTE_CATALOG = 0,   /* the whole catalog */
    KA_PLANS_ROUTE_PLAN,          /* one plan: id */
    KA_PLANS_ROUTE_NOT_FOUND      /* 404 PLAN_NOT_FOUND */
} ka_plans_route_e;

/*
 * Where a request under a keyauth_plans location goes (catalog.h says how):
 * base is the location's prefix, uri nginx's normalized URI, raw the path
 * as the client sent it (before '?') or NULL when the configuration made
 * the URI. On KA_PLANS_ROUTE_PLAN, id points into uri.
 */
ka_plans_route_e ka_plans_route(ka_str_t base, ka_str_t uri, const ka_str_t *raw,
    ka_str_t *id);

/* plan_id == NULL: the whole catalog; else one plan. */
void ka_edge_plans(ka_edge_t *edge, const char *plan_id, size_t plan_id_len,
    ka_plans_result_t *out);

/* ---- the IP lookup tool ---- */

#define KA_IP_JSON_MAX 320

/* The JSON answer for an IP address (ip, version, canonical, type,
 * reverseDns) written into out (>= KA_IP_JSON_MAX bytes); returns its
 * length, or 0 if text is not an IPv4 or IPv6 address. */
size_t ka_ip_lookup_json(const char *text, size_t len, char *out,
    size_t out_len);

/* ---- per-key rate limits (GCRA) in memory shared by all workers ---- */

typedef struct {
    void  (*lock)(void *data);
    void  (*unlock)(void *data);
    void   *data;
} ka_lock_t;

typedef struct {
    int       allowed;
    uint32_t  limit;          /* effective requests per minute */
    uint32_t  remaining;      /* further requests admissible right now */
    uint64_t  retry_after_s;  /* if refused; rounded up, >= 1 */
    uint64_t  reset_s;        /* until the full burst is back; rounded up */
    int       warn_full;      /* a live state was evicted: log (due once a minute) */
} ka_rate_result_t;

#define KA_RATE_BYTES_PER_KEY 32

/* Formats memory as an empty table (0 if too small) / checks one is there. */
int ka_rate_table_format(void *mem, size_t size);
int ka_rate_table_attach(void *mem, size_t size);
size_t ka_rate_table_slots(void *mem);
uint64_t ka_rate_table_busy_evictions(void *mem);

/* Starts loading the key's rate and usage slots, both at once, before
 * ka_rate_check() and ka_usage_count() read them: their cache and TLB misses
 * overlap rather than follow each other. */
void ka_zone_prefetch(void *rate_table, void *usage_table,
    const ka_auth_result_t *key);

/* Charges one request of an authenticated key at its effective rate,
 * min(requested, entitlement), with a burst of the same number. share:
 * keyauth_shared_limits is on, so an admitted request is also counted for
 * the next exchange with the other edges. */
void ka_rate_check(void *table, const ka_auth_result_t *key, uint64_t now_ns,
    int share, const ka_lock_t *lock, ka_rate_result_t *out);

/* Drops every key's count of requests spent since the last exchange (while
 * Redis is away, what is spent stays this edge's). */
void ka_rate_table_discard_spent(void *table);

/* ---- quotas: units used per period, in the quota ledger (quota_ledger.h),
 * a file beside the usage store that every worker maps shared ---- */

typedef struct ka_quota_ledger_s ka_quota_ledger_t;

/* Opens (making it, and the usage directory dir, if missing) the ledger in
 * dir, with room for at least `slots` subjects (0: the default, 262,144;
 * a multiple of 64): a smaller ledger grows to it. NULL on failure, with
 * err filled. */
ka_quota_ledger_t *ka_quota_open(const char *dir, uint64_t slots, char *err,
    size_t err_len);
void ka_quota_close(ka_quota_ledger_t *ledger);
/* Writes the ledger's changed pages to disk (the usage collection's). */
int ka_quota_sync(ka_quota_ledger_t *ledger, char *err, size_t err_len);

typedef enum {
    KA_QUOTA_FREE = 0,      /* no quota in force, or the call costs nothing */
    KA_QUOTA_ADMIT,         /* every quota has room */
    KA_QUOTA_EXCEEDED,      /* 429 QUOTA_EXCEEDED: policy[refused] is used up */
    KA_QUOTA_UNAVAILABLE    /* 503: no ledger, or no room in it; reason says */
} ka_quota_verdict_e;

#define KA_QUOTA_KEY     0
#define KA_QUOTA_ACCOUNT 1

typedef struct {
    uint8_t   period;       /* KA_QUOTA_NONE: not in force */
    uint16_t  tag;          /* the period charged */
    uint64_t  units;
    uint64_t  used;         /* in this period: after the charge once charged */
    int64_t   reset_s;      /* seconds until the period ends (>= 1); -1: never */
    int64_t   window_s;     /* the period's length; 0: total */
    /* where its use lives (quota_ledger.h's QuotaRef) */
    void     *word;
    void     *seq;
    uint32_t  seen;
} ka_quota_policy_t;

typedef struct {
    ka_quota_verdict_e  verdict;
    int                 refused;       /* KA_QUOTA_KEY or KA_QUOTA_ACCOUNT */
    /* a quota went uncounted for this call: the ledger had no room and
     * could not grow (counted in ka_quota_stats' no_room) */
    int                 unmetered;
    ka_quota_policy_t   policy[2];
    char                reason[KA_REASON_LEN];
} ka_quota_result_t;

/* Checks, charging nothing, that each quota of an authenticated key has
 * room for `need` units (the location's cost, or 1 when the upstream
 * reports the cost; 0: a free call, never refused, its balances only
 * shown). ledger may be NULL. */
void ka_quota_check(ka_quota_ledger_t *ledger, const ka_auth_result_t *key,
    uint64_t need, int64_t now_ms, ka_quota_result_t *out);

/* Charges cost units to every quota checked. fit: only if each still has
 * room (else nothing is charged and out->verdict becomes KA_QUOTA_EXCEEDED,
 * returning 0); otherwise charged whatever the balance (may go below 0).
 * Returns 1 when charged. */
int ka_quota_charge(ka_quota_ledger_t *ledger, const ka_auth_result_t *key,
    ka_quota_result_t *q, uint64_t cost, int fit, int64_t now_ms);

/* A metered call, admitted with `reserved` units charged (its location's
 * cost, at least 1: so the calls in flight never hold more than the quota
 * has), settles when its upstream reports `reported`: the difference is
 * charged (past the quota if need be) or given back, in the periods the
 * reservation was charged to. */
void ka_quota_settle(ka_quota_ledger_t *ledger, const ka_auth_result_t *key,
    ka_quota_result_t *q, uint64_t reserved, uint64_t reported, int64_t now_ms);

typedef struct {
    uint64_t  slots;    /* room in all its tables */
    uint64_t  live;     /* slots with use in a period not over (last sweep) */
    uint64_t  in_use;   /* slots ever given to a subject */
    uint64_t  no_room;  /* subjects that found no room, ever */
} ka_quota_stats_t;

/* What keyauth_status shows of the ledger (ledger may be NULL: zeros). */
void ka_quota_stats(ka_quota_ledger_t *ledger, ka_quota_stats_t *out);

/* The quota timer's, off the request path: sweeps the next
 * KA_QUOTA_SWEEP_PART slots, releasing the credits of keys that can never
 * be used again (edge may be NULL: none released); after a whole walk it
 * records how many slots are live and grows the ledger past three quarters
 * live. 0, or -1 with err saying why it could not grow. */
#define KA_QUOTA_SWEEP_PART 65536
typedef struct {
    int       walked;    /* a whole walk ended with this part */
    int       grew;
    uint64_t  live;      /* of the walk, when walked */
    uint64_t  released;  /* so far in the walk */
    char      err[KA_REASON_LEN];
} ka_quota_tend_t;
int ka_quota_tend(ka_quota_ledger_t *ledger, ka_edge_t *edge, int64_t now_ms,
    ka_quota_tend_t *out);

/* A reported cost: a decimal integer 0..KA_QUOTA_MAX_COST, else -1. */
#define KA_QUOTA_MAX_COST 1000000000
int64_t ka_quota_parse_cost(const char *text, size_t len);

/* ---- rate limits shared across edges through Redis (shared_exchange.h):
 * one exchange at a time, driven by the glue's socket and timer ---- */

typedef struct ka_shared_s ka_shared_t;

typedef struct {
    size_t  published;    /* keys whose spent counts went out */
    size_t  folded;       /* key entries of other edges charged here */
    size_t  unplaced;     /* ... not charged: the zone had no idle slot */
    size_t  entries;      /* stream entries read */
    size_t  bad_entries;  /* entries of an unknown layout, skipped */
    size_t  capped;       /* keys whose charge was cut to the bound */
    int     more;         /* more entries wait: exchange again at once */
    int     resynced;     /* the stream's ids went backwards: sharing was not
                             working until now; reading resumes after this
                             edge's newest entry (err says what was seen) */
} ka_shared_result_t;

/* A random 64-bit id (OpenSSL RAND_bytes): an edge's tag on its entries. */
uint64_t ka_random_u64(void);

/* NULL on failure, with err filled. user and password may be empty. */
ka_shared_t *ka_shared_create(ka_str_t stream, ka_str_t user,
    ka_str_t password, uint64_t edge_id, char *err, size_t err_len);
void ka_shared_destroy(ka_shared_t *x);

/* A new connection: AUTH again, read from the stream's newest entry. */
void ka_shared_reset(ka_shared_t *x);

/* Takes the rate table's spent counts and makes the exchange's request
 * (valid until the next call). -1 with err filled on failure. */
int ka_shared_begin(ka_shared_t *x, void *rate_table, const char **req,
    size_t *len, char *err, size_t err_len);

/* Bytes read from Redis: 0 more are needed, 1 the answer is complete,
 * -1 the answer is not Redis's (err filled): close the connection. */
int ka_shared_feed(ka_shared_t *x, const char *data, size_t len, char *err,
    size_t err_len);

/* After ka_shared_feed returned 1: folds what other edges spent. -1 with err
 * filled if Redis refused a command or answered out of shape; 0 otherwise,
 * with err filled if out->resynced. */
int ka_shared_finish(ka_shared_t *x, void *rate_table, uint64_t now_ns,
    const ka_lock_t *lock, ka_shared_result_t *out, char *err,
    size_t err_len);

/* ---- per-key usage: counted in shared memory, collected off the request
 * path into the usage environment (usage_table.h, usage_env.h) ---- */

typedef struct ka_usage_env_s ka_usage_env_t;  /* the collecting worker's writer */

#define KA_USAGE_BYTES_PER_KEY 64

int ka_usage_table_format(void *mem, size_t size);
int ka_usage_table_attach(void *mem, size_t size);
size_t ka_usage_table_slots(void *mem);
uint64_t ka_usage_table_drops(void *mem);

typedef enum {
    KA_USAGE_ALLOWED = 0,      /* let through */
    KA_USAGE_RATE_LIMITED,     /* 429 RATE_LIMITED */
    KA_USAGE_QUOTA_EXCEEDED,   /* 429 QUOTA_EXCEEDED */
    KA_USAGE_UNITS_ONLY        /* units charged after the answer of a call counted before */
} ka_usage_outcome_e;

/* Counts one request of an authenticated key (its outcome, the units it
 * was charged) and its last use. Atomics only; the lock only to give a new
 * key its slot. Returns 1 when the table was full and the once-a-minute
 * warning is due, else 0. */
int ka_usage_count(void *table, const ka_auth_result_t *key,
    ka_usage_outcome_e outcome, uint64_t units, int64_t now_ms,
    uint64_t now_ns, const ka_lock_t *lock);

/* Opens (making it if missing) the usage environment at path; day buckets
 * are kept days_kept days. NULL on failure, with err filled. */
ka_usage_env_t *ka_usage_env_open(const char *path, uint32_t days_kept,
    char *err, size_t err_len);
void ka_usage_env_close(ka_usage_env_t *env);
/* 1 when the files at its path are no longer the ones it has open (the
 * store removed, or another put there): close it and open the path anew. */
int ka_usage_env_replaced(const ka_usage_env_t *env);

/* Moves the deltas of the slots from *from on, at most one write
 * transaction (4096 slots), into env: into the keys' totals and the hour
 * and day buckets of their counts (each delta's last call: the zone keeps a
 * key's hours apart), and frees the slots of keys idle for idle_ms. A
 * collection calls it until *from reaches ka_usage_table_slots(), so that a
 * large zone gives the event loop back between parts; the last part also
 * ages out the buckets past their keeping at now_ms, whether or not
 * anything was counted. Returns the number of keys written and advances
 * *from, or -1 with err filled: then the deltas of that part are back in
 * the table and *from stays where it began. Any worker may call it at any
 * time: a delta is taken by exactly one caller. */
long ka_usage_flush_part(void *table, ka_usage_env_t *env, size_t *from,
    int64_t now_ms, int64_t idle_ms, const ka_lock_t *lock,
    char *err, size_t err_len);

/* CLOCK_MONOTONIC in nanoseconds: shared by all processes, never jumps. */
uint64_t ka_monotonic_ns(void);

/* Masks API keys and console tokens in a log line, in place, keeping the
 * 12-character display prefix. Returns how many were masked. */
size_t ka_redact_secrets(char *text, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* KEYAUTH_CORE_H */
