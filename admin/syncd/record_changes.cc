#include "record_changes.h"

#include <algorithm>

#include "etcd_keyspace.h"

namespace keyauth::syncd {

std::optional<RecordChange> record_change(std::string_view prefix, std::string_view etcd_key,
                                          std::optional<std::string> value) {
    std::optional<EtcdRecordName> name = parse_etcd_record_key(prefix, etcd_key);
    if (!name) return std::nullopt;
    if (!is_primary(name->table)) return std::nullopt;
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

std::string watched_prefix(std::string_view prefix) { return std::string(prefix) + "/"; }

}  // namespace keyauth::syncd
