// The business's own ids of accounts (externalId), unique across accounts,
// and the console sessions its login mints. Both live in tables of their
// own that edges never mirror (account_external_ids, console_sessions).
#include <algorithm>
#include <cstring>

#include "key_format.h"
#include "le.h"
#include "rfc3339.h"
#include "sha256.h"
#include "store.h"
#include "store_internal.h"
#include "validation.h"

namespace keyauth {
using namespace store_detail;
namespace {

constexpr size_t kExternalIdMax = 200;

// "x" ++ external id -> account id; "a" ++ account id -> external id
std::string by_external(std::string_view external_id) { return "x" + std::string(external_id); }
std::string by_account(const Id &account) { return "a" + std::string(bytes(account)); }

std::string u64_bytes(uint64_t v) {
    unsigned char b[8];
    store_le<uint64_t>(b, v);
    return std::string(reinterpret_cast<const char *>(b), sizeof b);
}

}  // namespace

namespace store_detail {

void validate_external_id(const std::optional<std::string> &external_id) {
    if (external_id) validate_label(*external_id, "externalId", kExternalIdMax);
}

void set_external_id(RecordReader &r, Mutation &m, const Id &account, const std::optional<std::string> &next,
                     AuditEvent &e) {
    auto was = r.get(Table::kExternalIds, by_account(account));
    m.expect(Table::kExternalIds, by_account(account), was);
    std::optional<std::string> old;
    if (was) old = std::string(*was);
    if (old == next) return;
    if (next) {
        auto holder = r.get(Table::kExternalIds, by_external(*next));
        if (holder) {
            Id other{};
            if (holder->size() == other.size()) std::memcpy(other.data(), holder->data(), other.size());
            throw StoreError(StoreError::Kind::kConflict, "externalId",
                             "externalId \"" + *next + "\" is the account " + id_to_string(kAccountIdPrefix, other) +
                                 "'s",
                             "EXTERNAL_ID_TAKEN");
        }
        m.expect(Table::kExternalIds, by_external(*next), std::nullopt);
        m.put(Table::kExternalIds, by_external(*next), std::string(bytes(account)));
        m.put(Table::kExternalIds, by_account(account), *next);
    } else {
        m.erase(Table::kExternalIds, by_account(account));
    }
    if (old) {
        m.expect(Table::kExternalIds, by_external(*old), std::string(bytes(account)));
        m.erase(Table::kExternalIds, by_external(*old));
    }
    auto shown = [](const std::optional<std::string> &v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    e.change("externalId", shown(old), shown(next));
}

}  // namespace store_detail

std::optional<Id> Store::find_account_by_external_id(std::string_view external_id) {
    if (external_id.empty() || external_id.size() > kExternalIdMax) return std::nullopt;
    auto r = backend_->read();
    auto v = r->get(Table::kExternalIds, by_external(external_id));
    if (!v) return std::nullopt;
    Id id{};
    if (v->size() != id.size()) corrupt("an external id's account id has an unexpected length");
    std::memcpy(id.data(), v->data(), id.size());
    return id;
}

std::optional<std::string> Store::external_id_of(const Id &account) {
    auto r = backend_->read();
    auto v = r->get(Table::kExternalIds, by_account(account));
    if (!v) return std::nullopt;
    return std::string(*v);
}

ConsoleSession Store::create_console_session(const Id &account, int64_t ttl_seconds, const Actor &actor) {
    if (ttl_seconds < kMinSessionSeconds || ttl_seconds > kMaxSessionSeconds)
        invalid("ttlSeconds", "ttlSeconds must be an integer from 60 to 86400");
    return write([&](RecordReader &r, Mutation &m) {
        FoundAccount found = account_for_write(r, account);
        if (found.account.record.status != KA_ACCOUNT_ACTIVE)
            throw StoreError(StoreError::Kind::kForbidden, "account",
                             "account " + id_to_string(kAccountIdPrefix, account) + " is suspended",
                             "ACCOUNT_SUSPENDED");
        m.expect(Table::kAccounts, bytes(account), found.stored);
        const int64_t now = clock_();
        // the account's sessions: the expired ones go, and the oldest past
        // the cap (each a token of its own: bounded per account)
        std::vector<std::pair<int64_t, std::string>> live;
        const std::string own(bytes(account));
        r.scan(Table::kConsoleSessions, own, own, [&](std::string_view key, std::string_view v) {
            const int64_t expires = v.size() == 8 ? static_cast<int64_t>(load_le<uint64_t>(
                                                        reinterpret_cast<const unsigned char *>(v.data())))
                                                  : 0;
            if (expires > now) {
                live.emplace_back(expires, std::string(key));
                return true;
            }
            m.erase(Table::kConsoleSessions, key);
            m.erase(Table::kConsoleTokens, key.substr(KA_ID_LEN));
            return true;
        });
        std::sort(live.begin(), live.end());
        for (size_t i = 0; i + kMaxSessions <= live.size(); i++) {
            m.erase(Table::kConsoleSessions, live[i].second);
            m.erase(Table::kConsoleTokens, std::string_view(live[i].second).substr(KA_ID_LEN));
        }
        ConsoleSession out{generate_secret(kConsoleTokenPrefix), now + ttl_seconds * 1000};
        const Digest hash = sha256(out.token);
        m.expect(Table::kConsoleTokens, bytes(hash), std::nullopt);
        m.put(Table::kConsoleTokens, bytes(hash), encode_token_record(TokenRecord{account, out.expires_ms}));
        m.put(Table::kConsoleSessions, own + std::string(bytes(hash)), u64_bytes(static_cast<uint64_t>(out.expires_ms)));
        std::vector<AuditEvent> events;
        AuditEvent &e = audit(events, actor, now, account, "account.create_session", "account",
                              id_to_string(kAccountIdPrefix, account));
        e.change("ttlSeconds", nullptr, ttl_seconds);
        e.change("expiresAt", nullptr, format_time(out.expires_ms));
        put_audit(r, m, events);
        return out;
    });
}

AccountPage Store::list_accounts_page(size_t limit, const std::optional<Id> &after) {
    if (limit == 0 || limit > kMaxPageSize) invalid("limit", "limit must be from 1 to 1000");
    AccountPage page;
    const std::string start = after ? std::string(bytes(*after)) + std::string(1, '\0') : std::string();
    backend_->read()->scan(Table::kAccounts, "", start, [&](std::string_view key, std::string_view v) {
        Id id{};
        if (key.size() != id.size()) corrupt("account id of unexpected length");
        std::memcpy(id.data(), key.data(), id.size());
        if (page.accounts.size() == limit) {
            page.next = page.accounts.back().id;
            return false;
        }
        page.accounts.push_back(account_from(id, v));
        return true;
    });
    return page;
}

}  // namespace keyauth
