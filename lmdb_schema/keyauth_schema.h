/*
 * keyauth LMDB schema v1: the on-disk contract shared by the nginx module,
 * keyauthd and keyauthctl. SCHEMA.md explains each database in prose.
 *
 * Every multi-byte integer is little-endian on disk, whatever the host. The
 * structs below document the layouts and pin the offsets with static_asserts;
 * codecs read and write the fields byte-wise at these offsets and never
 * overlay a struct on LMDB memory (LMDB gives no alignment guarantee).
 *
 * Plain C (C11) so that any reader can include it.
 */
#ifndef KEYAUTH_SCHEMA_H
#define KEYAUTH_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#ifndef __cplusplus
#include <assert.h> /* static_assert in C11 */
#endif

/* 2: schema 1 plus the key_slots table (below). 3: key records kept by key
 * id in key_records (appended in creation order), keys_by_hash and keys
 * gone, key_slots the one index by hash. Readers read 1 to 3; writers
 * upgrade a store of 1 or 2 to 3 when they open it. */
#define KA_SCHEMA_VERSION 3u
#define KA_SCHEMA_VERSION_MIN_READ 1u

/* Named databases of the environment. */
#define KA_DB_KEY_RECORDS    "key_records"    /* key id -> SHA-256(secret) ++ key record (schema 3) */
#define KA_DB_KEYS_BY_HASH   "keys_by_hash"   /* SHA-256(secret) -> key record (schema 1, 2) */
#define KA_DB_KEYS           "keys"           /* key id -> SHA-256(secret) (schema 1, 2) */
#define KA_DB_ACCOUNT_KEYS   "account_keys"   /* account id ++ key id -> SHA-256(secret) */
#define KA_DB_ACCOUNTS       "accounts"       /* account id -> account record */
#define KA_DB_CONSOLE_TOKENS "console_tokens" /* SHA-256(token) -> console token record */
#define KA_DB_PLANS          "plans"          /* plan id -> plan record */
#define KA_DB_META           "meta"           /* ASCII name -> value */
#define KA_DB_AUDIT          "audit"          /* account id ++ event id -> audit event */
#define KA_DB_KEY_SLOTS      "key_slots"      /* the hot table: header, and chunks of slots */
/* the admin API's (keyauthd and keyauthctl only; never mirrored to an edge) */
#define KA_DB_ADMIN_TOKENS   "admin_tokens"   /* SHA-256(token) -> admin token record */
#define KA_DB_EXTERNAL_IDS   "account_external_ids" /* "x" ++ external id -> account id; "a" ++ account id -> external id */
#define KA_DB_CONSOLE_SESSIONS "console_sessions" /* account id ++ SHA-256(session token) -> expiry (u64 LE ms) */
/* webhooks (keyauthd and keyauthctl only; never mirrored to an edge) */
#define KA_DB_WEBHOOKS       "webhooks"       /* webhook id -> webhook record (JSON) */
#define KA_DB_WEBHOOK_OUTBOX "webhook_outbox" /* event id -> event (JSON), written with the change */
#define KA_DB_WEBHOOK_DELIVERIES "webhook_deliveries" /* webhook id ++ event id -> delivery (JSON) */
#define KA_DB_WEBHOOK_DUE    "webhook_due"    /* u64 BE ms ++ webhook id ++ event id -> "" (pending only) */
#define KA_DB_WEBHOOK_MARKS  "webhook_marks"  /* ASCII mark -> u64 LE ms: a threshold or expiry event emitted */
/* leak reports (keyauthd and keyauthctl only; never mirrored; sorts after every mirrored table) */
#define KA_DB_REPORTED_LEAKS "reported_leaks" /* account id ++ key id -> a leak report of the key (JSON) */
#define KA_DB_COUNT          19

/* Keys of the meta database. */
#define KA_META_SCHEMA_VERSION  "schema_version"  /* u32 */
#define KA_META_CATALOG_VERSION "catalog_version" /* u64, bumped by every plans import */
#define KA_META_FX_USD_INR      "fx_usd_inr"      /* fx record */
/* keyauthd's and keyauthctl's alone (the edge takes a key of any prefix):
 * never mirrored to an edge */
#define KA_META_KEY_PREFIX      "key_prefix"      /* JSON: the key prefix NAMEs, newest first */
/* Written only by keyauth-syncd, in the same write transaction as the records
 * they cover; like schema_version they belong to the environment and are never
 * mirrored from etcd. */
#define KA_META_SYNCD_REVISION  "syncd_revision"  /* u64: highest etcd mod_revision applied */
#define KA_META_CLUSTER_ID      "cluster_id"      /* u64: the etcd cluster mirrored */

#define KA_HASH_LEN 32 /* SHA-256 */
#define KA_ID_LEN   12 /* 48-bit big-endian creation ms ++ 48 random bits */

/* Key ids and account ids sort by creation time because the first six bytes
 * are the big-endian creation time in milliseconds. */

/* Bounds enforced by every writer and re-checked by every reader. */
#define KA_SCOPE_MAX_LEN   64
#define KA_SCOPES_MAX      32
#define KA_NAME_MAX_LEN    200
#define KA_PREFIX_MAX_LEN  16

/* ---- key record (keys_by_hash value) ---------------------------------- */

#define KA_KEY_RECORD_V1 1u

enum ka_key_status {
    KA_KEY_ACTIVE  = 1,
    KA_KEY_REVOKED = 2
};

/* Fixed head; followed by the tail:
 *   scope_count x (u8 length, bytes)   -- scopes_bytes bytes in all
 *   prefix_len bytes of prefix
 *   name_len bytes of name (UTF-8) */
struct ka_key_record_v1 {
    uint16_t version;            /* KA_KEY_RECORD_V1 */
    uint8_t  status;             /* enum ka_key_status */
    uint8_t  scope_count;
    uint32_t requested_rpm;      /* rateLimitPerMinute as asked at creation */
    uint8_t  key_id[KA_ID_LEN];
    uint8_t  account_id[KA_ID_LEN];
    int64_t  created_ms;         /* Unix time, milliseconds */
    int64_t  revoked_ms;         /* 0 while not revoked */
    int64_t  expires_ms;         /* 0 = never expires */
    uint16_t scopes_bytes;
    uint8_t  prefix_len;
    uint8_t  name_len;
    uint32_t reserved;           /* 0 */
};

#define KA_KEY_RECORD_HEAD 64

static_assert(offsetof(struct ka_key_record_v1, status) == 2, "layout");
static_assert(offsetof(struct ka_key_record_v1, scope_count) == 3, "layout");
static_assert(offsetof(struct ka_key_record_v1, requested_rpm) == 4, "layout");
static_assert(offsetof(struct ka_key_record_v1, key_id) == 8, "layout");
static_assert(offsetof(struct ka_key_record_v1, account_id) == 20, "layout");
static_assert(offsetof(struct ka_key_record_v1, created_ms) == 32, "layout");
static_assert(offsetof(struct ka_key_record_v1, revoked_ms) == 40, "layout");
static_assert(offsetof(struct ka_key_record_v1, expires_ms) == 48, "layout");
static_assert(offsetof(struct ka_key_record_v1, scopes_bytes) == 56, "layout");
static_assert(offsetof(struct ka_key_record_v1, prefix_len) == 58, "layout");
static_assert(offsetof(struct ka_key_record_v1, name_len) == 59, "layout");
static_assert(sizeof(struct ka_key_record_v1) == KA_KEY_RECORD_HEAD, "layout");

/* Layout 2 (written by every writer since key lifecycle): the v1 head with
 * version 2, then the ids that tie a rolled key to its chain, then the same
 * tail. A zero id means none. Readers still read layout 1 (no chain: the
 * rate-limit state is the key's own). */
#define KA_KEY_RECORD_V2 2u

struct ka_key_record_v2 {
    struct ka_key_record_v1 head;  /* version = KA_KEY_RECORD_V2 */
    uint8_t  rate_id[KA_ID_LEN];     /* whose GCRA state the key spends: the
                                        first key of its roll chain */
    uint8_t  rolled_from[KA_ID_LEN]; /* the key this one replaced */
    uint8_t  rolled_to[KA_ID_LEN];   /* the key that replaced this one */
    uint32_t reserved;               /* 0 */
};

#define KA_KEY_RECORD_V2_HEAD 104

static_assert(offsetof(struct ka_key_record_v2, rate_id) == 64, "layout");
static_assert(offsetof(struct ka_key_record_v2, rolled_from) == 76, "layout");
static_assert(offsetof(struct ka_key_record_v2, rolled_to) == 88, "layout");
static_assert(sizeof(struct ka_key_record_v2) == KA_KEY_RECORD_V2_HEAD, "layout");

/* ---- quotas (plans, accounts and keys) ---------------------------------- */

/* A quota's period: calendar UTC (a day from 00:00, a month from the 1st,
 * 00:00), or total credits that never refill (keys only). */
enum ka_quota_period {
    KA_QUOTA_NONE  = 0,  /* no quota: unlimited */
    KA_QUOTA_DAY   = 1,
    KA_QUOTA_MONTH = 2,
    KA_QUOTA_TOTAL = 3
};

/* Units of a quota: 1 .. KA_QUOTA_UNITS_MAX (the edge's ledger keeps a
 * period's use in 48 bits beside the period's tag, see SCHEMA.md). */
#define KA_QUOTA_UNITS_MAX ((((uint64_t) 1) << 48) - 1)

/* Layout 3 (written for a key with its own quota; others stay layout 2):
 * the v2 head with version 3, then the quota, then the same tail. Such a key
 * is never inline in key_slots. */
#define KA_KEY_RECORD_V3 3u

struct ka_key_record_v3 {
    struct ka_key_record_v2 head;  /* head.head.version = KA_KEY_RECORD_V3 */
    uint8_t  quota_period;           /* enum ka_quota_period, never NONE */
    uint8_t  reserved[7];            /* 0 */
    uint64_t quota_units;
};

#define KA_KEY_RECORD_V3_HEAD 120

static_assert(offsetof(struct ka_key_record_v3, quota_period) == 104, "layout");
static_assert(offsetof(struct ka_key_record_v3, quota_units) == 112, "layout");
static_assert(sizeof(struct ka_key_record_v3) == KA_KEY_RECORD_V3_HEAD, "layout");

/* Layout 4 (issue 44; written for a key whose quota an operator set, the
 * others stay layout 2 or 3): layout 3 with quota flags in its first
 * reserved byte. A managed quota was sold (keyauthctl, the admin API): the
 * console may lower it, never raise, move or remove it. A reader of layout
 * 3 only refuses such a key (unknown version) rather than lose the mark. */
#define KA_KEY_RECORD_V4 4u

enum ka_key_quota_flags {
    KA_KEY_QUOTA_MANAGED = 1  /* set in every layout 4 record; no other bit */
};

struct ka_key_record_v4 {
    struct ka_key_record_v2 head;  /* head.head.version = KA_KEY_RECORD_V4 */
    uint8_t  quota_period;           /* enum ka_quota_period, never NONE */
    uint8_t  quota_flags;            /* KA_KEY_QUOTA_MANAGED */
    uint8_t  reserved[6];            /* 0 */
    uint64_t quota_units;
};

#define KA_KEY_RECORD_V4_HEAD 120

static_assert(offsetof(struct ka_key_record_v4, quota_period) == 104, "layout");
static_assert(offsetof(struct ka_key_record_v4, quota_flags) == 105, "layout");
static_assert(offsetof(struct ka_key_record_v4, quota_units) == 112, "layout");
static_assert(sizeof(struct ka_key_record_v4) == KA_KEY_RECORD_V4_HEAD, "layout");

/* Layout 5 (issue 48; written for a key with allowedIps or meta, the others
 * stay layout 2, 3 or 4): the v4 head with version 5, its quota optional
 * (period NONE with 0 units: none; flags 0, or MANAGED with a quota), then
 * the restrictions, then the v1 tail followed by allowed_ip_count entries of
 * KA_CIDR_ENTRY_BYTES (the network in IPv6 form, IPv4 as ::ffff:a.b.c.d,
 * then the prefix length 0..128) and meta_bytes of meta (a JSON object,
 * handed on, never read). Such a key is never inline in key_slots. */
#define KA_KEY_RECORD_V5 5u

#define KA_CIDR_ENTRY_BYTES 17
#define KA_ALLOWED_IPS_MAX  32
#define KA_META_MAX_BYTES   1024

/* The restrictions, the same 8 bytes in key layout 5 and account layout 4. */
struct ka_restrictions_v1 {
    uint8_t  allowed_ip_count;       /* 0: any address; else 1..KA_ALLOWED_IPS_MAX */
    uint8_t  reserved8;              /* 0 */
    uint16_t meta_bytes;             /* 0: no meta; else 2..KA_META_MAX_BYTES */
    uint32_t reserved32;             /* 0 */
};

static_assert(sizeof(struct ka_restrictions_v1) == 8, "layout");

struct ka_key_record_v5 {
    struct ka_key_record_v4    head;          /* head.head.head.version = KA_KEY_RECORD_V5 */
    struct ka_restrictions_v1  restrictions;
};

#define KA_KEY_RECORD_V5_HEAD 128

static_assert(offsetof(struct ka_key_record_v5, restrictions) == 120, "layout");
static_assert(sizeof(struct ka_key_record_v5) == KA_KEY_RECORD_V5_HEAD, "layout");

/* ---- account record (accounts value) ----------------------------------- */

#define KA_ACCOUNT_RECORD_V1 1u

enum ka_account_status {
    KA_ACCOUNT_ACTIVE    = 1,
    KA_ACCOUNT_SUSPENDED = 2
};

/* Fixed head; followed by name_len bytes of name (UTF-8). */
struct ka_account_record_v1 {
    uint16_t version;            /* KA_ACCOUNT_RECORD_V1 */
    uint8_t  status;             /* enum ka_account_status */
    uint8_t  name_len;
    uint32_t entitlement_rpm;    /* cap on every key's effective rate */
    int64_t  created_ms;
};

#define KA_ACCOUNT_RECORD_HEAD 16

static_assert(offsetof(struct ka_account_record_v1, status) == 2, "layout");
static_assert(offsetof(struct ka_account_record_v1, name_len) == 3, "layout");
static_assert(offsetof(struct ka_account_record_v1, entitlement_rpm) == 4, "layout");
static_assert(offsetof(struct ka_account_record_v1, created_ms) == 8, "layout");
static_assert(sizeof(struct ka_account_record_v1) == KA_ACCOUNT_RECORD_HEAD, "layout");

/* Layout 2 adds the account controls. Fixed head; followed by name_len
 * bytes of name, then allowed_scope_count x (u8 length, bytes) of allowed
 * scopes (none: any scope). Layout 1 reads as max_keys = KA_DEFAULT_MAX_KEYS,
 * any scope, live_keys unknown. */
#define KA_ACCOUNT_RECORD_V2 2u
#define KA_DEFAULT_MAX_KEYS  100u
#define KA_MAX_KEYS_LIMIT    100000000u
#define KA_LIVE_KEYS_UNKNOWN 0xffffffffu

struct ka_account_record_v2 {
    struct ka_account_record_v1 head;  /* version = KA_ACCOUNT_RECORD_V2 */
    uint32_t max_keys;             /* cap on active keys */
    uint32_t live_keys;            /* keys created and not revoked, an upper
                                      bound of the active ones (expired keys
                                      count until counted again), or
                                      KA_LIVE_KEYS_UNKNOWN */
    uint16_t allowed_scopes_bytes;
    uint8_t  allowed_scope_count;
    uint8_t  reserved8;            /* 0 */
    uint32_t reserved32;           /* 0 */
};

#define KA_ACCOUNT_RECORD_V2_HEAD 32

static_assert(offsetof(struct ka_account_record_v2, max_keys) == 16, "layout");
static_assert(offsetof(struct ka_account_record_v2, live_keys) == 20, "layout");
static_assert(offsetof(struct ka_account_record_v2, allowed_scopes_bytes) == 24, "layout");
static_assert(offsetof(struct ka_account_record_v2, allowed_scope_count) == 26, "layout");
static_assert(sizeof(struct ka_account_record_v2) == KA_ACCOUNT_RECORD_V2_HEAD, "layout");

/* Layout 3 (every writer since plans carry entitlements): an account may be
 * on a plan. Fixed head; followed by the name, the allowed scopes (as in
 * layout 2), then plan_id_len bytes of plan id. A value whose override bit
 * is clear follows the plan's entitlement when the account has a plan and
 * the plan states it; otherwise the account's own value applies. */
#define KA_ACCOUNT_RECORD_V3 3u

enum ka_account_override {
    KA_OVERRIDE_RATE     = 1,  /* entitlement_rpm */
    KA_OVERRIDE_MAX_KEYS = 2,  /* max_keys */
    KA_OVERRIDE_QUOTA    = 4   /* quota_period, quota_units */
};

struct ka_account_record_v3 {
    struct ka_account_record_v2 head;  /* head.head.version = KA_ACCOUNT_RECORD_V3 */
    uint8_t  overrides;            /* enum ka_account_override bits */
    uint8_t  quota_period;         /* KA_QUOTA_NONE, DAY or MONTH */
    uint8_t  plan_id_len;          /* 0: no plan */
    uint8_t  reserved8;            /* 0 */
    uint32_t reserved32;           /* 0 */
    uint64_t quota_units;          /* 0 when quota_period is NONE */
};

#define KA_ACCOUNT_RECORD_V3_HEAD 48

static_assert(offsetof(struct ka_account_record_v3, overrides) == 32, "layout");
static_assert(offsetof(struct ka_account_record_v3, quota_period) == 33, "layout");
static_assert(offsetof(struct ka_account_record_v3, plan_id_len) == 34, "layout");
static_assert(offsetof(struct ka_account_record_v3, quota_units) == 40, "layout");
static_assert(sizeof(struct ka_account_record_v3) == KA_ACCOUNT_RECORD_V3_HEAD, "layout");

/* Layout 4 (issue 48; written for an account with allowedIps or meta, the
 * others stay layout 3): the v3 head with version 4, then the restrictions
 * as in key layout 5; followed by the v3 tail (name, allowed scopes, plan
 * id), then the allowed IP entries, then the meta. */
#define KA_ACCOUNT_RECORD_V4 4u

struct ka_account_record_v4 {
    struct ka_account_record_v3 head;  /* head.head.head.version = KA_ACCOUNT_RECORD_V4 */
    struct ka_restrictions_v1   restrictions;
};

#define KA_ACCOUNT_RECORD_V4_HEAD 56

static_assert(offsetof(struct ka_account_record_v4, restrictions) == 48, "layout");
static_assert(sizeof(struct ka_account_record_v4) == KA_ACCOUNT_RECORD_V4_HEAD, "layout");

/* ---- console token record (console_tokens value) ----------------------- */

#define KA_TOKEN_RECORD_V1 1u

struct ka_token_record_v1 {
    uint16_t version;            /* KA_TOKEN_RECORD_V1 */
    uint16_t reserved;           /* 0 */
    uint8_t  account_id[KA_ID_LEN];
};

#define KA_TOKEN_RECORD_SIZE 16

static_assert(offsetof(struct ka_token_record_v1, account_id) == 4, "layout");
static_assert(sizeof(struct ka_token_record_v1) == KA_TOKEN_RECORD_SIZE, "layout");

/* Layout 2: a token replaced by rotate-token with a grace period works until
 * expires_ms. Layout 1 never expires. */
#define KA_TOKEN_RECORD_V2 2u

struct ka_token_record_v2 {
    struct ka_token_record_v1 head;  /* version = KA_TOKEN_RECORD_V2 */
    int64_t expires_ms;              /* 0 = the account's current token */
};

#define KA_TOKEN_RECORD_V2_SIZE 24

static_assert(offsetof(struct ka_token_record_v2, expires_ms) == 16, "layout");
static_assert(sizeof(struct ka_token_record_v2) == KA_TOKEN_RECORD_V2_SIZE, "layout");

/* ---- plan record (plans value; the key is the plan id) ------------------ */

#define KA_PLAN_RECORD_V1 1u
#define KA_PLAN_ID_MAX_LEN   64
#define KA_FEATURES_MAX      32
#define KA_FEATURE_MAX_LEN   200

/* Fixed head; followed by name_len bytes of name, then feature_count x
 * (u8 length, bytes) of features. */
struct ka_plan_record_v1 {
    uint16_t version;            /* KA_PLAN_RECORD_V1 */
    uint8_t  popular;            /* 0 or 1 */
    uint8_t  feature_count;
    int32_t  sort_order;
    uint64_t price_paise;        /* the amount charged, INR x 100 */
    uint8_t  name_len;
    uint8_t  reserved[7];        /* 0 */
};

#define KA_PLAN_RECORD_HEAD 24

static_assert(offsetof(struct ka_plan_record_v1, feature_count) == 3, "layout");
static_assert(offsetof(struct ka_plan_record_v1, sort_order) == 4, "layout");
static_assert(offsetof(struct ka_plan_record_v1, price_paise) == 8, "layout");
static_assert(offsetof(struct ka_plan_record_v1, name_len) == 16, "layout");
static_assert(sizeof(struct ka_plan_record_v1) == KA_PLAN_RECORD_HEAD, "layout");

/* Layout 2 (every writer since plans carry entitlements): the v1 head with
 * version 2, then what the plan entitles an account to, then the same tail.
 * A value whose bit is clear is not stated by the plan. */
#define KA_PLAN_RECORD_V2 2u

enum ka_plan_entitlement {
    KA_PLAN_STATES_RATE     = 1,
    KA_PLAN_STATES_MAX_KEYS = 2,
    KA_PLAN_STATES_QUOTA    = 4   /* quota_period NONE: unlimited */
};

struct ka_plan_record_v2 {
    struct ka_plan_record_v1 head; /* head.version = KA_PLAN_RECORD_V2 */
    uint8_t  states;               /* enum ka_plan_entitlement bits */
    uint8_t  quota_period;         /* KA_QUOTA_NONE, DAY or MONTH */
    uint16_t reserved16;           /* 0 */
    uint32_t rate_rpm;
    uint32_t max_keys;
    uint32_t reserved32;           /* 0 */
    uint64_t quota_units;          /* 0 when quota_period is NONE */
};

#define KA_PLAN_RECORD_V2_HEAD 48

static_assert(offsetof(struct ka_plan_record_v2, states) == 24, "layout");
static_assert(offsetof(struct ka_plan_record_v2, quota_period) == 25, "layout");
static_assert(offsetof(struct ka_plan_record_v2, rate_rpm) == 28, "layout");
static_assert(offsetof(struct ka_plan_record_v2, max_keys) == 32, "layout");
static_assert(offsetof(struct ka_plan_record_v2, quota_units) == 40, "layout");
static_assert(sizeof(struct ka_plan_record_v2) == KA_PLAN_RECORD_V2_HEAD, "layout");

/* ---- exchange rate (meta "fx_usd_inr") ----------------------------------- */

#define KA_FX_RECORD_V1 1u

struct ka_fx_record_v1 {
    uint16_t version;            /* KA_FX_RECORD_V1 */
    uint16_t reserved16;         /* 0 */
    uint32_t reserved32;         /* 0 */
    uint64_t inr_per_usd_micro;  /* INR per USD x 10^6 */
    int64_t  set_ms;             /* when it was set */
};

#define KA_FX_RECORD_SIZE 24

static_assert(offsetof(struct ka_fx_record_v1, inr_per_usd_micro) == 8, "layout");
static_assert(offsetof(struct ka_fx_record_v1, set_ms) == 16, "layout");
static_assert(sizeof(struct ka_fx_record_v1) == KA_FX_RECORD_SIZE, "layout");

/* account_keys key: account id followed by key id. */
#define KA_ACCOUNT_KEY_LEN (2 * KA_ID_LEN)

/* ---- audit event (audit value) ------------------------------------------ */

/* Key: the account the event concerns (all zero: the operator's own
 * actions, plans.import and fx.set) followed by the event id with every
 * bit inverted, so that one account's events are one range, newest first.
 * Value: u16 version, u16 reserved, then the event as UTF-8 JSON (SCHEMA.md
 * lists its fields) of at most KA_AUDIT_JSON_MAX bytes. */
#define KA_AUDIT_RECORD_V1 1u
#define KA_AUDIT_RECORD_HEAD 4
#define KA_AUDIT_JSON_MAX 16384
#define KA_AUDIT_KEY_LEN (2 * KA_ID_LEN)

/* ---- the usage environment (a sibling of the store: "<keyauth_db>.usage") --
 * Written by one nginx worker per edge (counts collected from the shm zone),
 * read by keyauthd (single host) and keyauth-syncd (many edges). Not part of
 * the store: keyauth-syncd may replace the store's directory wholesale. */

#define KA_USAGE_DIR_SUFFIX  ".usage"
#define KA_USAGE_DB_USAGE    "usage"    /* account id ++ key id -> usage record */
#define KA_USAGE_DB_META     "meta"     /* ASCII name -> value */
#define KA_USAGE_DB_HOURS    "hours"    /* bucket key (hour number) -> bucket record */
#define KA_USAGE_DB_DAYS     "days"     /* bucket key (day number) -> bucket record */
#define KA_USAGE_DB_COUNT    4
#define KA_USAGE_META_EDGE_ID "edge_id" /* 12 random bytes, made at first open */
#define KA_USAGE_META_DAYS_KEPT "days_kept" /* u32 LE: keyauth_usage_history, set at each open */
#define KA_USAGE_EDGE_ID_LEN 12
#define KA_USAGE_KEY_LEN     (2 * KA_ID_LEN)
/* The quota ledger (src/core/quota_ledger.h, SCHEMA.md): a file in the
 * usage environment's directory, mapped shared by every nginx worker. */
#define KA_QUOTA_LEDGER_FILE "quota.ledger"

#define KA_USAGE_RECORD_V1 1u

/* Cumulative totals of one key on one edge since its usage env was made. */
struct ka_usage_record_v1 {
    uint16_t version;            /* KA_USAGE_RECORD_V1 */
    uint16_t reserved16;         /* 0 */
    uint32_t reserved32;         /* 0 */
    uint64_t allowed;            /* requests let through */
    uint64_t rate_limited;       /* requests refused with 429 */
    int64_t  last_used_ms;       /* the last of either, Unix ms; 0 = never */
};

#define KA_USAGE_RECORD_SIZE 32

static_assert(offsetof(struct ka_usage_record_v1, allowed) == 8, "layout");
static_assert(offsetof(struct ka_usage_record_v1, rate_limited) == 16, "layout");
static_assert(offsetof(struct ka_usage_record_v1, last_used_ms) == 24, "layout");
static_assert(sizeof(struct ka_usage_record_v1) == KA_USAGE_RECORD_SIZE, "layout");

/* Usage over time: one key's counts in one UTC hour or day on one edge.
 * Key: the period's number since the Unix epoch (hours or days), u32
 * big-endian, so that the table is in time order and old periods are a
 * range at its start; then account id ++ key id. */
#define KA_USAGE_BUCKET_KEY_LEN (4 + 2 * KA_ID_LEN)
#define KA_USAGE_BUCKET_V1 1u

struct ka_usage_bucket_v1 {
    uint16_t version;            /* KA_USAGE_BUCKET_V1 */
    uint16_t reserved16;         /* 0 */
    uint32_t reserved32;         /* 0 */
    uint64_t allowed;            /* requests let through */
    uint64_t rate_limited;       /* refused with 429 RATE_LIMITED */
    uint64_t quota_exceeded;     /* refused with 429 QUOTA_EXCEEDED */
    uint64_t units;              /* units charged (keyauth_cost, or metered) */
};

#define KA_USAGE_BUCKET_SIZE 40

static_assert(offsetof(struct ka_usage_bucket_v1, allowed) == 8, "layout");
static_assert(offsetof(struct ka_usage_bucket_v1, units) == 32, "layout");
static_assert(sizeof(struct ka_usage_bucket_v1) == KA_USAGE_BUCKET_SIZE, "layout");

/* ---- key_slots: the hot table (schema 2) ------------------------------ */

/* An open-addressing table over every key, derived from keys_by_hash by the
 * writers: the edge finds a key in one or two cache lines at any store size.
 * key_slots holds KA_KEY_SLOTS_HEADER_KEY -> header, and u32 big-endian chunk
 * number -> chunk (chunk_slots slots of KA_KEY_SLOT_SIZE bytes, the whole
 * value). Slot i lives in chunk i / chunk_slots at (i % chunk_slots) * 64.
 * A key whose hash starts with the big-endian u64 h has its home slot at
 * (h * capacity) >> 64 and sits at the first slot from there, going up (no
 * wrap-around), that is empty or holds its fingerprint; no slot lies more
 * than max_probe - 1 past its home. */
#define KA_KEY_SLOTS_V1          1u   /* schema 2: IN_RECORD reads keys_by_hash */
#define KA_KEY_SLOTS_V2          2u   /* schema 3: one key a slot; IN_RECORD reads
                                         key_records by the slot's key id */
#define KA_KEY_SLOTS_HEADER_KEY  "header"
#define KA_KEY_SLOT_SIZE         64
#define KA_KEY_SLOT_FINGERPRINT  16   /* bytes 0-15 of SHA-256(secret) */
#define KA_KEY_SLOT_SCOPE_BYTES  10
#define KA_KEY_SLOTS_MAX_PROBE   4096 /* a reader never looks further */

struct ka_key_slots_header_v1 {
    uint16_t version;      /* KA_KEY_SLOTS_V1 or _V2: the same layout */
    uint16_t slot_size;    /* KA_KEY_SLOT_SIZE */
    uint32_t chunk_slots;  /* slots a chunk */
    uint64_t capacity;     /* home slots: 0 .. capacity - 1 */
    uint64_t slots;        /* slots in all chunks: > capacity, a multiple of chunk_slots */
    uint64_t count;        /* slots in use */
    uint32_t max_probe;    /* 1 + the largest distance of a slot from its home */
    uint32_t reserved;     /* 0 */
};

#define KA_KEY_SLOTS_HEADER_SIZE 40

static_assert(offsetof(struct ka_key_slots_header_v1, chunk_slots) == 4, "layout");
static_assert(offsetof(struct ka_key_slots_header_v1, capacity) == 8, "layout");
static_assert(offsetof(struct ka_key_slots_header_v1, slots) == 16, "layout");
static_assert(offsetof(struct ka_key_slots_header_v1, count) == 24, "layout");
static_assert(offsetof(struct ka_key_slots_header_v1, max_probe) == 32, "layout");
static_assert(sizeof(struct ka_key_slots_header_v1) == KA_KEY_SLOTS_HEADER_SIZE, "layout");

enum ka_key_slot_state {
    KA_SLOT_EMPTY     = 0,
    KA_SLOT_INLINE    = 1, /* the fields below are the key's */
    KA_SLOT_IN_RECORD = 2  /* the key's fields do not fit: v2, read key_records
                              by key_id and compare the whole hash; v1, read
                              keys_by_hash by the whole hash (also for keys
                              that share the fingerprint) */
};

struct ka_key_slot_v1 {
    uint8_t  state;                   /* enum ka_key_slot_state */
    uint8_t  status;                  /* enum ka_key_status */
    uint8_t  scope_count;
    uint8_t  scopes_bytes;            /* <= KA_KEY_SLOT_SCOPE_BYTES */
    uint32_t requested_rpm;
    uint8_t  fingerprint[KA_KEY_SLOT_FINGERPRINT];
    uint8_t  key_id[KA_ID_LEN];       /* also the rate id: a rolled key is IN_RECORD;
                                         in v2 set in IN_RECORD slots too */
    uint8_t  account_id[KA_ID_LEN];
    uint8_t  expires_ms[6];           /* u48, 0 = never */
    uint8_t  scopes[KA_KEY_SLOT_SCOPE_BYTES]; /* (u8 length, bytes) entries */
};

static_assert(offsetof(struct ka_key_slot_v1, requested_rpm) == 4, "layout");
static_assert(offsetof(struct ka_key_slot_v1, fingerprint) == 8, "layout");
static_assert(offsetof(struct ka_key_slot_v1, key_id) == 24, "layout");
static_assert(offsetof(struct ka_key_slot_v1, account_id) == 36, "layout");
static_assert(offsetof(struct ka_key_slot_v1, expires_ms) == 48, "layout");
static_assert(offsetof(struct ka_key_slot_v1, scopes) == 54, "layout");
static_assert(sizeof(struct ka_key_slot_v1) == KA_KEY_SLOT_SIZE, "layout");

#endif /* KEYAUTH_SCHEMA_H */
