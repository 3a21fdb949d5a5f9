// etcd keys as a member (or anyone who can write under the prefix) may hold
// them, through the parsers that turn them into LMDB records: the keyspace
// parser and syncd's batch builder. Never a crash; what parses names exactly
// the key it came from (etcd_record_key gives it back), and syncd only ever
// hands primary records of mirrored names to the LMDB applier.
#include <cstdint>
#include <string>
#include <string_view>

#include "etcd_keyspace.h"
#include "record_changes.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    const std::string prefix(kDefaultEtcdPrefix);
    // the input as a key under the prefix, and as a key of its own
    for (const std::string &key : {prefix + "/" + std::string(in), std::string(in)}) {
        if (auto name = parse_etcd_record_key(prefix, key)) {
            if (etcd_record_key(prefix, name->table, name->key) != key) __builtin_trap();
        }
        etcd::Event ev;
        ev.kv.key = key;
        ev.kv.value = std::string(in);
        ev.kv.mod_revision = static_cast<int64_t>(size);
        syncd::Batch b = syncd::batch_of_events(prefix, {ev});
        for (const RecordChange &c : b.changes) {
            if (!is_mirrored(c.table)) __builtin_trap();
            if (c.table == Table::kMeta && !is_mirrored_meta(c.key)) __builtin_trap();
        }
        if (b.read != 1 || b.changes.size() + b.skipped != 1) __builtin_trap();
    }
    std::string bytes;
    if (hex_decode(in, bytes) && hex_encode(bytes) != in) __builtin_trap();
    return 0;
}
