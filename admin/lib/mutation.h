// A write to the store, as data: the primary records it puts or deletes and
// the guards it was computed under. The Store's business rules build one;
// a backend (LMDB on one host, etcd later) applies it all or nothing, and
// only if every guard still holds. Records are the bytes the LMDB schema
// defines (lmdb_schema/SCHEMA.md), so one mutation means the same thing to
// every backend, and etcd can mirror LMDB record for record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keyauth {

// The named databases of the schema.
enum class Table : uint8_t {
    kKeysByHash,
    kKeys,
    kAccountKeys,
    kAccounts,
    kConsoleTokens,
    kPlans,
    kMeta,
    kAudit,
    kAdminTokens,
    kExternalIds,
    kConsoleSessions,
    kWebhooks,
    kWebhookOutbox,
    kWebhookDeliveries,
    kWebhookDue,
    kWebhookMarks,
    kReportedLeaks,
};
inline constexpr size_t kTableCount = 17;

// The LMDB database name; also the table's segment of the etcd keyspace.
const char *table_name(Table table) noexcept;
std::optional<Table> table_named(std::string_view name) noexcept;
// Primary tables hold facts; the others are indexes derived from them when
// records are applied (SCHEMA.md, "Primary and derived tables").
bool is_primary(Table table) noexcept;
// The primary tables an edge's LMDB holds: all but the audit trail and the
// admin API's (admin tokens, the accounts' external ids and console
// sessions), webhooks and leak reports, which only keyauthd and
// keyauthctl read (from etcd, in many-edge mode).
bool is_mirrored(Table table) noexcept;
// The webhook sender's tables (webhook_records.h): keyauthd's alone.
bool is_webhook_table(Table table) noexcept;
// meta holds primary records (catalog_version, fx_usd_inr) beside the
// environment's own (schema_version): only these names are ever mirrored.
bool is_mirrored_meta(std::string_view name) noexcept;
// The meta names a mutation may write: the mirrored ones and key_prefix
// (the store's alone, never an edge's).
bool is_primary_meta(std::string_view name) noexcept;

// One primary record written (value) or deleted (no value).
struct RecordChange {
    Table table;
    std::string key;
    std::optional<std::string> value;
};

// What a change was computed from, checked again where it is applied.
struct Guard {
    enum class Kind {
        kEquals,     // the record still holds `value` (the bytes it was read with)
        kAbsent,     // no record at `key` (a new id, a new hash)
        kNoneAfter,  // no record of the table sorts after `key` ("" : the table is empty)
        kUnchanged,  // no record of the table written since the attempt read it (a
                     // write that depends on what a whole table does not hold)
    };
    Kind kind;
    Table table;
    std::string key;
    std::string value;  // kEquals only
};

struct Mutation {
    std::vector<RecordChange> changes;  // applied in this order
    std::vector<Guard> guards;

    void put(Table table, std::string_view key, std::string value);
    void erase(Table table, std::string_view key);
    // The record as read: its bytes, or none (it must still be absent).
    void expect(Table table, std::string_view key, std::optional<std::string_view> value);
    void expect_none_after(Table table, std::string_view key);
    // No record of `table` put or deleted by anyone else since this write
    // attempt first read the store (a scan of the table, say).
    void expect_unchanged(Table table);
};

}  // namespace keyauth
