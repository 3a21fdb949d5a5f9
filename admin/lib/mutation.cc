#include "mutation.h"

#include "keyauth_schema.h"

namespace keyauth {
namespace {

constexpr const char *kNames[kTableCount] = {
    KA_DB_KEYS_BY_HASH, KA_DB_KEYS, KA_DB_ACCOUNT_KEYS, KA_DB_ACCOUNTS,
    KA_DB_CONSOLE_TOKENS, KA_DB_PLANS, KA_DB_META, KA_DB_AUDIT,
    KA_DB_ADMIN_TOKENS, KA_DB_EXTERNAL_IDS, KA_DB_CONSOLE_SESSIONS,
    KA_DB_WEBHOOKS, KA_DB_WEBHOOK_OUTBOX, KA_DB_WEBHOOK_DELIVERIES, KA_DB_WEBHOOK_DUE, KA_DB_WEBHOOK_MARKS,
    KA_DB_REPORTED_LEAKS,
};
// One Table per named database but key_records and key_slots, where LMDB
// keeps what the Tables keys_by_hash and keys name (lmdb_keys.h).
static_assert(kTableCount + 2 == KA_DB_COUNT, "one Table per named database");

}  // namespace

const char *table_name(Table table) noexcept { return kNames[static_cast<size_t>(table)]; }

std::optional<Table> table_named(std::string_view name) noexcept {
    for (size_t i = 0; i < kTableCount; i++) {
        if (name == kNames[i]) return static_cast<Table>(i);
    }
    return std::nullopt;
}

bool is_primary(Table table) noexcept {
    return table != Table::kKeys && table != Table::kAccountKeys;
}

bool is_mirrored(Table table) noexcept {
    return is_primary(table) && table != Table::kAudit && table != Table::kAdminTokens &&
           table != Table::kExternalIds && table != Table::kConsoleSessions && !is_webhook_table(table) &&
           table != Table::kReportedLeaks;
}

bool is_webhook_table(Table table) noexcept {
    return table == Table::kWebhooks || table == Table::kWebhookOutbox || table == Table::kWebhookDeliveries ||
           table == Table::kWebhookDue || table == Table::kWebhookMarks;
}

bool is_mirrored_meta(std::string_view name) noexcept {
    return name == KA_META_CATALOG_VERSION || name == KA_META_FX_USD_INR;
}

bool is_primary_meta(std::string_view name) noexcept {
    return is_mirrored_meta(name) || name == KA_META_KEY_PREFIX;
}

void Mutation::put(Table table, std::string_view key, std::string value) {
    changes.push_back(RecordChange{table, std::string(key), std::move(value)});
}

void Mutation::erase(Table table, std::string_view key) {
    changes.push_back(RecordChange{table, std::string(key), std::nullopt});
}

void Mutation::expect(Table table, std::string_view key, std::optional<std::string_view> value) {
    if (value) {
        guards.push_back(Guard{Guard::Kind::kEquals, table, std::string(key), std::string(*value)});
    } else {
        guards.push_back(Guard{Guard::Kind::kAbsent, table, std::string(key), {}});
    }
}

void Mutation::expect_none_after(Table table, std::string_view key) {
    guards.push_back(Guard{Guard::Kind::kNoneAfter, table, std::string(key), {}});
}

void Mutation::expect_unchanged(Table table) { guards.push_back(Guard{Guard::Kind::kUnchanged, table, {}, {}}); }

}  // namespace keyauth
