// What the Store needs from where records live: consistent reads, and one
// write at a time applied as a Mutation. The single-host backend is LMDB
// (lmdb_backend.h); an etcd backend reads with ranges and applies a mutation
// as one etcd txn whose compares are the guards.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "mutation.h"

namespace keyauth {

// One consistent view of the tables. What it returns stays valid until the
// reader is destroyed (or, for a write attempt, until it applies).
class RecordReader {
public:
    virtual ~RecordReader() = default;
    virtual std::optional<std::string_view> get(Table table, std::string_view key) = 0;
    // The records whose key starts with `within` and is >= `from`, in key
    // order, while `visit` says true. `within` bounds the read (etcd walks
    // its whole range for every page: a bound keeps an account's list from
    // costing the whole table).
    using Visit = std::function<bool(std::string_view key, std::string_view value)>;
    virtual void scan(Table table, std::string_view within, std::string_view from, const Visit &visit) = 0;
    // The greatest key of the table, if it holds any.
    virtual std::optional<std::string> last_key(Table table) = 0;
};

// One attempt at a write: read what the change depends on, then apply it.
class WriteAttempt : public RecordReader {
public:
    // Applies every change of `m`, atomically and durably (committed before
    // it returns), if every guard holds; false when one does not, and then
    // nothing is written. At most once per attempt.
    virtual bool apply(const Mutation &m) = 0;
};

// What keyauthd's /metrics shows of the store; a backend fills what it
// can tell cheaply (etcd: nothing).
struct StoreGauges {
    std::optional<uint64_t> map_bytes;   // the LMDB map's size
    std::optional<uint64_t> used_bytes;  // pages in use (the file's high-water mark)
    std::optional<uint64_t> keys;        // key records
    std::optional<uint64_t> accounts;    // account records
};

class StoreBackend {
public:
    virtual ~StoreBackend() = default;
    virtual std::unique_ptr<RecordReader> read() = 0;
    // Throws StoreError kBusy when it cannot start a write in time.
    virtual std::unique_ptr<WriteAttempt> begin_write() = 0;
    // How long begin_write may wait for its turn; zero: as long as it takes.
    virtual void set_write_wait_limit(std::chrono::milliseconds limit) = 0;
    // How many new keys one mutation may hold (the etcd backend's txn limit).
    virtual size_t max_keys_per_write() const = 0;
    virtual StoreGauges gauges() { return {}; }
};

}  // namespace keyauth
