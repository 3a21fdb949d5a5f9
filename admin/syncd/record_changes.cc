#include "record_changes.h"

#include <algorithm>

#include "etcd_keyspace.h"
#include "usage_keyspace.h"

namespace keyauth::syncd {

std::optional<RecordChange> record_change(std::string_view prefix, std::string_view etcd_key,
                                          std::optional<std::string> value) {
    std::optional<EtcdRecordName> name = parse_etcd_record_key(prefix, etcd_key);
    if (!name) return std::nullopt;
    if (!is_mirrored(name->table)) return std::nullopt;
    if (name->table == Table::kMeta && !is_mirrored_meta(name->key)) return std::nullopt;
    return RecordChange{name->table, std::move(name->key), std::move(value)};
}

Batch batch_of_events(std::string_view prefix, const std::vector<etcd::Event> &events) {
    Batch b;
    b.changes.reserve(events.size());
    for (const etcd::Event &e : events) {
        ++b.read;
        b.revision = std::max(b.revision, e.kv.mod_revision);
        std::optional<std::string> value;
        if (e.type == etcd::EventType::kPut) value = e.kv.value;
        auto change = record_change(prefix, e.kv.key, std::move(value));
        if (change) {
            b.changes.push_back(std::move(*change));
        } else {
            ++b.skipped;
        }
    }
    return b;
}

Batch batch_of_kvs(std::string_view prefix, const std::vector<etcd::KeyValue> &kvs) {
    Batch b;
    b.changes.reserve(kvs.size());
    for (const etcd::KeyValue &kv : kvs) {
        ++b.read;
        b.revision = std::max(b.revision, kv.mod_revision);
        auto change = record_change(prefix, kv.key, kv.value);
        if (change) {
            b.changes.push_back(std::move(*change));
        } else {
            ++b.skipped;
        }
    }
    return b;
}

std::vector<etcd::RangeRequest> snapshot_ranges(std::string_view prefix) {
    std::vector<etcd::RangeRequest> out;
    auto add = [&](std::string start) {
        etcd::RangeRequest r;
        r.range_end = etcd::prefix_range_end(start);
        r.key = std::move(start);
        out.push_back(std::move(r));
    };
    for (size_t i = 0; i < kTableCount; i++) {
        const Table t = static_cast<Table>(i);
        if (!is_mirrored(t)) continue;
        const std::string table = etcd_table_prefix(prefix, t);
        if (t != Table::kKeysByHash) {
            add(table);
            continue;
        }
        for (int byte = 0; byte < 256; byte++) add(table + hex_encode(std::string(1, static_cast<char>(byte))));
    }
    return out;
}

// The mirrored tables' prefixes, the first and the last in key order: the
// watch starts at the one and ends after the other, so what sorts outside
// them (account_keys, written with every key; usage) never reaches it.
namespace {
std::pair<std::string, std::string> mirrored_bounds(std::string_view prefix) {
    std::string first, last;
    for (size_t i = 0; i < kTableCount; i++) {
        const Table t = static_cast<Table>(i);
        if (!is_mirrored(t)) continue;
        const std::string p = etcd_table_prefix(prefix, t);
        if (first.empty() || p < first) first = p;
        if (last.empty() || p > last) last = p;
    }
    return {first, last};
}
}  // namespace

std::string watched_prefix(std::string_view prefix) { return mirrored_bounds(prefix).first; }

std::string watched_end(std::string_view prefix) { return etcd::prefix_range_end(mirrored_bounds(prefix).second); }

}  // namespace keyauth::syncd
