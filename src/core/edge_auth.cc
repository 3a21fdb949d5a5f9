// The C API of keyauth_core.h: Bearer parsing, format check, hashing, record
// lookup, status, expiry, account and scopes, in that order, cheapest first.
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "auth_header.h"
#include "edge.h"
#include "edge_store.h"
#include "ids.h"
#include "ip_allowlist.h"
#include "key_format.h"
#include "keyauth_core.h"
#include "records.h"
#include "redact.h"
#include "scope.h"
#include "sha256.h"


namespace keyauth {
namespace {

void verdict(ka_auth_result_t *out, ka_verdict_e v, ka_log_level_e level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void verdict(ka_auth_result_t *out, ka_verdict_e v, ka_log_level_e level, const char *fmt, ...) {
    out->verdict = v;
    out->log_level = level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

const char *decode_problem(DecodeStatus st) {
    return st == DecodeStatus::kUnknownVersion ? "unknown layout version" : "corrupt layout";
}

// Inlined into both ways in (a header's token, the verify API's key): the
// request path pays for no extra call (bench/callgrind.sh's guard).
__attribute__((always_inline)) inline void check_key(ka_edge_t *edge, std::string_view token,
                                                     const sockaddr *client, const ka_str_t *scopes,
                                                     size_t n_scopes, int64_t now_ms, ka_auth_result_t *out) {
    if (token.empty()) {
        return verdict(out, KA_AUTH_KEY_REQUIRED, KA_LOG_INFO, "no API key");
    }
    if (!key_format_ok(token)) {  // any NAME: one not this deployment's is not found
        return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_INFO,
                       "API key of %zu bytes is not a well-formed keyauth key", token.size());
    }
    out->prefix_len = kDisplayPrefixLen;
    std::memcpy(out->prefix, token.data(), kDisplayPrefixLen);

    if (edge == nullptr || !edge->store) {
        return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR, "key store is not open");
    }
    const Digest hash = sha256(token);

    EdgeStore &store = *edge->store;
    EdgeStore::Snapshot snap(store);
    int rc = snap.begin();
    if (rc != 0) {
        return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR, "LMDB read transaction: %s",
                       mdb_strerror(rc));
    }
    const KeyRecordView *cached = edge->keys.find(hash.data(), snap.generation());
    if (cached == nullptr) {
        const EdgeStore::Snapshot::KeyLookup found = snap.find_key(hash.data());
        if (found.problem != nullptr) {
            return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR,
                           "%s %s (version %u); refusing to authenticate", found.where,
                           found.problem, found.version);
        }
        if (found.rc == MDB_NOTFOUND) {
            return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_INFO,
                           "API key \"%.*s...\" is unknown", static_cast<int>(out->prefix_len),
                           out->prefix);
        }
        if (found.rc != 0) {
            return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR, "LMDB get in %s: %s", found.where,
                           mdb_strerror(found.rc));
        }
        KeyRecordView view;
        DecodeStatus st = found.slot != nullptr
                              ? decode_key_slot(found.slot, view)
                              : decode_key_record(found.record.data(), found.record.size(), view);
        if (st != DecodeStatus::kOk && found.slot != nullptr) {
            return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_ERROR,
                           "key slot of \"%.*s...\" is corrupt; treating the key as invalid",
                           static_cast<int>(out->prefix_len), out->prefix);
        }
        if (st != DecodeStatus::kOk) {
            return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_ERROR,
                           "key record of \"%.*s...\" has %s %u; treating the key as invalid",
                           static_cast<int>(out->prefix_len), out->prefix, decode_problem(st),
                           static_cast<unsigned>(view.version));
        }
        cached = &edge->keys.put(hash.data(), snap.generation(), view);
    }
    const KeyRecordView &key = *cached;
    out->found = 1;
    std::memcpy(out->key_id_bin, key.key_id, KA_ID_LEN);
    std::memcpy(out->account_id_bin, key.account_id, KA_ID_LEN);
    std::memcpy(out->rate_id_bin, key.rate_id, KA_ID_LEN);
    out->requested_rpm = key.requested_rpm;
    out->granted_scopes = {key.scopes.data(), key.scopes.size()};
    out->granted_scope_count = key.scope_count;
    // Text ids only for the refusals below, which log them.
    char key_id[KA_ID_TEXT_LEN], account_id[KA_ID_TEXT_LEN];
    auto ids = [&] {
        format_id(kKeyIdPrefix, key.key_id, key_id);
        format_id(kAccountIdPrefix, key.account_id, account_id);
    };

    if (key.status == KA_KEY_REVOKED) {
        ids();
        return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_INFO, "API key %.*s is revoked",
                       KA_ID_TEXT_LEN, key_id);
    }
    if (key.expires_ms != 0 && now_ms >= key.expires_ms) {
        ids();
        return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_INFO, "API key %.*s has expired",
                       KA_ID_TEXT_LEN, key_id);
    }

    const AccountState *account = edge->accounts.find(key.account_id, snap.generation());
    if (account == nullptr) {
        std::string_view raw;
        rc = snap.get(store.accounts(), key.account_id, KA_ID_LEN, raw);
        if (rc != 0 && rc != MDB_NOTFOUND) {
            return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR, "LMDB get in %s: %s",
                           KA_DB_ACCOUNTS, mdb_strerror(rc));
        }
        AccountRecordView view;
        DecodeStatus st = rc == 0 ? decode_account_record(raw.data(), raw.size(), view)
                                  : DecodeStatus::kCorrupt;
        if (rc == MDB_NOTFOUND) {
            ids();
            return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_ERROR,
                           "account %.*s of API key %.*s is missing; treating the key as invalid",
                           KA_ID_TEXT_LEN, account_id, KA_ID_TEXT_LEN, key_id);
        }
        if (st != DecodeStatus::kOk) {  // the version tells the operator which build wrote it
            ids();
            return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_ERROR,
                           "account %.*s of API key %.*s has %s %u; treating the key as invalid",
                           KA_ID_TEXT_LEN, account_id, KA_ID_TEXT_LEN, key_id, decode_problem(st),
                           static_cast<unsigned>(view.version));
        }
        // The plan, if the account follows it in anything. A plan gone from
        // the catalog entitles nothing: the account's own values apply, as
        // writers keep them. One that cannot be read fails closed: its
        // quota may be all that limits the account.
        PlanRecordView plan_view;
        const PlanRecordView *plan = nullptr;
        constexpr uint8_t kAllOverridden = KA_OVERRIDE_RATE | KA_OVERRIDE_MAX_KEYS | KA_OVERRIDE_QUOTA;
        if (!view.plan_id.empty() && view.overrides != kAllOverridden) {
            std::string_view plan_raw;
            rc = snap.get(store.plans(), view.plan_id.data(), view.plan_id.size(), plan_raw);
            if (rc != 0 && rc != MDB_NOTFOUND) {
                return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR, "LMDB get in %s: %s",
                               KA_DB_PLANS, mdb_strerror(rc));
            }
            if (rc == 0) {
                const DecodeStatus pst = decode_plan_record(plan_raw.data(), plan_raw.size(), plan_view);
                if (pst != DecodeStatus::kOk) {
                    ids();
                    return verdict(out, KA_AUTH_UNAVAILABLE, KA_LOG_ERROR,
                                   "plan \"%.*s\" of account %.*s has %s %u; refusing to authenticate",
                                   static_cast<int>(view.plan_id.size()), view.plan_id.data(),
                                   KA_ID_TEXT_LEN, account_id, decode_problem(pst),
                                   static_cast<unsigned>(plan_view.version));
                }
                plan = &plan_view;
            }
        }
        const Entitlements e = effective_entitlements(view, plan);
        account = &edge->accounts.put(key.account_id, snap.generation(),
                                      AccountState{view.status, e.rate_rpm, e.quota, view.allowed_ips,
                                                   view.plan_id, view.meta});
    }
    if (account->status != KA_ACCOUNT_ACTIVE) {
        ids();
        return verdict(out, KA_AUTH_ACCOUNT_SUSPENDED, KA_LOG_INFO,
                       "API key %.*s belongs to suspended account %.*s", KA_ID_TEXT_LEN, key_id,
                       KA_ID_TEXT_LEN, account_id);
    }
    // allowedIps: the key's list and its account's must both fit; an address
    // not known (no client, a Unix socket) fits none. Charged nothing.
    if (!key.allowed_ips.empty() || !account->allowed_ips.empty()) {
        unsigned char addr[16];
        const bool known = client_address(client, addr);
        const bool key_fits = known && allowed_ips_fit(key.allowed_ips, addr);
        if (!key_fits || !allowed_ips_fit(account->allowed_ips, addr)) {
            ids();
            return verdict(out, KA_AUTH_IP_NOT_ALLOWED, KA_LOG_INFO,
                           "API key %.*s may not be used from this address (%s)", KA_ID_TEXT_LEN, key_id,
                           !known     ? "not an IP address: it fits no allowedIps"
                           : key_fits ? "outside its account's allowedIps"
                                      : "outside the key's allowedIps");
        }
    }
    out->entitlement_rpm = account->entitlement_rpm;
    out->key_quota_period = key.quota.period;
    out->key_quota_units = key.quota.units;
    out->account_quota_period = account->quota.period;
    out->account_quota_units = account->quota.units;

    for (size_t i = 0; i < n_scopes; i++) {
        std::string_view required(scopes[i].data, scopes[i].len);
        if (!key.grants(required)) {
            out->missing_scope = scopes[i];
            ids();
            return verdict(out, KA_AUTH_SCOPE_MISSING, KA_LOG_INFO,
                           "API key %.*s lacks scope \"%.*s\"", KA_ID_TEXT_LEN, key_id,
                           static_cast<int>(required.size()), required.data());
        }
    }
    out->verdict = KA_AUTH_OK;  // reason stays empty: nothing to log
}

void authenticate(ka_edge_t *edge, const char *header, size_t header_len, const sockaddr *client,
                  const ka_str_t *scopes, size_t n_scopes, int64_t now_ms,
                  ka_auth_result_t *out) {
    std::string_view token;
    BearerParse parsed = header == nullptr ? BearerParse::kMissing
                                           : parse_bearer({header, header_len}, token);
    if (parsed == BearerParse::kMissing) {
        return verdict(out, KA_AUTH_KEY_REQUIRED, KA_LOG_INFO, "no Bearer API key");
    }
    if (parsed == BearerParse::kMalformed) {
        return verdict(out, KA_AUTH_KEY_INVALID, KA_LOG_INFO, "malformed Bearer credentials");
    }
    check_key(edge, token, client, scopes, n_scopes, now_ms, out);
}

// Only what every outcome reads is reset; the rest is set where it applies.
void reset(ka_auth_result_t *out) {
    out->log_level = KA_LOG_NONE;
    out->reason[0] = '\0';
    out->prefix_len = 0;
    out->found = 0;
    out->requested_rpm = 0;
    out->entitlement_rpm = 0;
    out->key_quota_period = out->account_quota_period = KA_QUOTA_NONE;
    out->key_quota_units = out->account_quota_units = 0;
    out->missing_scope = {nullptr, 0};
}

// Nothing on this path throws; the guard keeps that promise if it changes.
template <typename Fn>
void guarded(ka_auth_result_t *out, Fn &&fn) {
    reset(out);
    try {
        fn();
    } catch (...) {
        out->verdict = KA_AUTH_UNAVAILABLE;
        out->log_level = KA_LOG_ERROR;
        snprintf(out->reason, sizeof out->reason, "internal error in keyauth core");
    }
}

}  // namespace
}  // namespace keyauth

extern "C" {

void ka_format_key_id(const unsigned char *bin, char *out) {
    keyauth::format_id(keyauth::kKeyIdPrefix, bin, out);
}

void ka_format_account_id(const unsigned char *bin, char *out) {
    keyauth::format_id(keyauth::kAccountIdPrefix, bin, out);
}

ka_edge_t *ka_edge_open(const char *path, char *err, size_t err_len) {
    try {
        std::unique_ptr<ka_edge_t> edge(new ka_edge_t());
        std::string why;
        edge->store = keyauth::EdgeStore::open(path, why);
        if (!edge->store) {
            snprintf(err, err_len, "%s", why.c_str());
            return nullptr;
        }
        return edge.release();
    } catch (const std::exception &e) {
        snprintf(err, err_len, "%s", e.what());
    } catch (...) {
        snprintf(err, err_len, "unknown failure");
    }
    return nullptr;
}

void ka_edge_close(ka_edge_t *edge) { delete edge; }

int ka_edge_stale(ka_edge_t *edge, char *why, size_t why_len) {
    const char *reason = edge->store->stale();
    if (reason == nullptr) return 0;
    snprintf(why, why_len, "%s", reason);
    return 1;
}

void ka_edge_idle(ka_edge_t *edge) { edge->store->release_if_idle(); }

void ka_edge_authenticate(ka_edge_t *edge, const char *header, size_t header_len,
                          const struct sockaddr *client, const ka_str_t *scopes, size_t n_scopes,
                          int64_t now_ms, ka_auth_result_t *out) {
    keyauth::guarded(out, [&] {
        keyauth::authenticate(edge, header, header_len, client, scopes, n_scopes, now_ms, out);
    });
}

void ka_edge_check_key(ka_edge_t *edge, const char *token, size_t token_len,
                       const struct sockaddr *client, const ka_str_t *scopes, size_t n_scopes,
                       int64_t now_ms, ka_auth_result_t *out) {
    keyauth::guarded(out, [&] {
        keyauth::check_key(edge, token ? std::string_view(token, token_len) : std::string_view(),
                           client, scopes, n_scopes, now_ms, out);
    });
}

int ka_required_scope_ok(const char *scope, size_t len) {
    std::string_view s(scope, len);
    return keyauth::scope_syntax_ok(s) && s.find('*') == std::string_view::npos;
}

size_t ka_redact_secrets(char *text, size_t len) { return keyauth::redact_secrets(text, len); }

}  // extern "C"
