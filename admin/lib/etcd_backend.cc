#include "etcd_backend.h"

#include <deque>
#include <map>
#include <optional>
#include <set>

#include "key_index.h"
#include "store_error.h"

namespace keyauth {

// Clients are not thread-safe and keep a connection per member alive: one
// per reader at a time, kept for the next reader when it is done.
class EtcdBackend::ClientPool {
public:
    explicit ClientPool(etcd::ClientOptions options) : options_(std::move(options)) {}

    std::unique_ptr<etcd::Client> take() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (!idle_.empty()) {
                auto c = std::move(idle_.back());
                idle_.pop_back();
                return c;
            }
        }
        std::string error;
        auto c = etcd::Client::make(options_, error);
        if (!c) throw StoreError(StoreError::Kind::kUnavailable, "", "etcd client: " + error);
        return c;
    }

    void give_back(std::unique_ptr<etcd::Client> c) {
        std::lock_guard<std::mutex> lock(mu_);
        if (idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
    }

private:
    static constexpr size_t kMaxIdle = 16;
    etcd::ClientOptions options_;
    std::mutex mu_;
    std::vector<std::unique_ptr<etcd::Client>> idle_;
};

namespace {

constexpr int64_t kScanPage = 200;

void check(const etcd::Status &st, const char *what) {
    if (st.ok()) return;
    throw StoreError(StoreError::Kind::kUnavailable, "",
                     std::string("etcd ") + what + " failed (" + etcd::errc_name(st.code) +
                         "): " + st.message);
}

// One snapshot of the store at one revision (fixed by the first read), and
// what was read from it: a write attempt's guards compare mod_revisions.
class EtcdAttempt final : public WriteAttempt {
public:
    EtcdAttempt(std::shared_ptr<EtcdBackend::ClientPool> pool, const std::string &prefix)
        : pool_(std::move(pool)), client_(pool_->take()), prefix_(prefix) {}
    ~EtcdAttempt() override {
        if (client_) pool_->give_back(std::move(client_));
    }

    std::optional<std::string_view> get(Table table, std::string_view key) override {
        return lookup(etcd_record_key(prefix_, table, key));
    }

    void scan(Table table, std::string_view within, std::string_view from, const Visit &visit) override {
        const std::string table_prefix = etcd_table_prefix(prefix_, table);
        if (from < within) from = within;
        etcd::RangeRequest r;
        r.key = table_prefix + hex_encode(from);
        r.range_end = etcd::prefix_range_end(table_prefix + hex_encode(within));
        r.limit = kScanPage;
        for (;;) {
            r.revision = revision_;
            etcd::RangeResponse out;
            check(client_->range(r, out), "read");
            pin(out.header.revision);
            for (etcd::KeyValue &kv : out.kvs) {
                auto name = parse_etcd_record_key(prefix_, kv.key);
                if (!name || name->table != table)
                    throw StoreError(StoreError::Kind::kCorrupt, "",
                                     "etcd holds a malformed record key under " + table_prefix);
                keys_.push_back(std::move(name->key));
                Read &e = remember(kv.key, std::move(kv.value), kv.mod_revision);
                if (!visit(keys_.back(), *e.value)) return;
            }
            if (!out.more || out.kvs.empty()) return;
            r.key = out.kvs.back().key;
            r.key.push_back('\0');
        }
    }

    std::optional<std::string> last_key(Table table) override {
        auto v = lookup(etcd_last_key_record(prefix_, table));
        if (!v) return std::nullopt;
        return std::string(*v);
    }

    bool apply(const Mutation &m) override;

private:
    struct Read {
        std::optional<std::string> value;
        int64_t mod_revision = 0;
    };

    void pin(int64_t revision) {
        if (revision_ == 0) revision_ = revision;
    }

    Read &remember(const std::string &etcd_key, std::optional<std::string> value, int64_t mod) {
        auto [it, fresh] = reads_.try_emplace(etcd_key);
        if (fresh) it->second = Read{std::move(value), mod};
        return it->second;
    }

    std::optional<std::string_view> lookup(const std::string &etcd_key) {
        auto it = reads_.find(etcd_key);
        if (it == reads_.end()) {
            etcd::RangeRequest r;
            r.key = etcd_key;
            r.revision = revision_;
            etcd::RangeResponse out;
            check(client_->range(r, out), "read");
            pin(out.header.revision);
            if (out.kvs.empty()) {
                it = reads_.try_emplace(etcd_key).first;
            } else {
                it = reads_.try_emplace(etcd_key, Read{std::move(out.kvs[0].value),
                                                       out.kvs[0].mod_revision})
                         .first;
            }
        }
        if (!it->second.value) return std::nullopt;
        return std::string_view(*it->second.value);
    }

    std::shared_ptr<EtcdBackend::ClientPool> pool_;
    std::unique_ptr<etcd::Client> client_;
    const std::string prefix_;
    int64_t revision_ = 0;
    std::map<std::string, Read> reads_;  // node-based: views into it stay valid
    std::deque<std::string> keys_;       // decoded keys handed to scan's visitor
    bool applied_ = false;
};

// The txn's writes by etcd key: etcd refuses a txn that writes one key
// twice, and the last write of a key in a mutation is the one that counts.
using Writes = std::map<std::string, std::optional<std::string>>;

bool EtcdAttempt::apply(const Mutation &m) {
    if (applied_) throw StoreError(StoreError::Kind::kInvalid, "", "a write attempt applies once");
    applied_ = true;
    etcd::TxnRequest txn;

    for (const Guard &g : m.guards) {
        switch (g.kind) {
        case Guard::Kind::kEquals: {
            std::string key = etcd_record_key(prefix_, g.table, g.key);
            auto it = reads_.find(key);
            if (it != reads_.end() && it->second.value && *it->second.value == g.value) {
                txn.compare.push_back(etcd::Compare::mod_revision_is(key, it->second.mod_revision));
            } else {  // not read through this attempt: compare the bytes
                txn.compare.push_back(etcd::Compare::value_is(std::move(key), g.value));
            }
            break;
        }
        case Guard::Kind::kAbsent:
            txn.compare.push_back(etcd::Compare::absent(etcd_record_key(prefix_, g.table, g.key)));
            break;
        case Guard::Kind::kNoneAfter: {
            std::string last = etcd_last_key_record(prefix_, g.table);
            if (g.key.empty()) {
                txn.compare.push_back(etcd::Compare::absent(std::move(last)));
            } else {
                txn.compare.push_back(etcd::Compare::value_is(std::move(last), g.key));
            }
            break;
        }
        case Guard::Kind::kUnchanged: {
            // since the revision every read of this attempt was made at
            if (revision_ == 0)
                throw StoreError(StoreError::Kind::kInvalid, "", "a guard on a whole table needs a read of it first");
            std::string table = etcd_table_prefix(prefix_, g.table);
            std::string end = etcd::prefix_range_end(table);
            txn.compare.push_back(etcd::Compare::none_written_after(std::move(table), std::move(end), revision_));
            break;
        }
        }
    }

    // New records (guarded absent) replace nothing: no need to read them.
    std::set<std::string> absent;
    for (const Guard &g : m.guards)
        if (g.kind == Guard::Kind::kAbsent) absent.insert(etcd_record_key(prefix_, g.table, g.key));

    Writes writes;
    std::map<Table, std::string> greatest;  // per table, the greatest key written
    auto put = [&](Table t, const std::string &key, std::string value) {
        writes[etcd_record_key(prefix_, t, key)] = std::move(value);
        std::string &g = greatest[t];
        if (key > g) g = key;
    };
    auto erase = [&](Table t, const std::string &key) {
        writes[etcd_record_key(prefix_, t, key)] = std::nullopt;
    };
    for (const RecordChange &c : m.changes) {
        if (!is_primary(c.table))
            throw StoreError(StoreError::Kind::kInvalid, "",
                             std::string(table_name(c.table)) + " is derived: its records are not written");
        if (c.table == Table::kKeysByHash) {
            // the index records: the replaced record's go, the new one's come
            std::optional<KeyIndex> next;
            if (c.value) next = key_index_of(*c.value);
            std::optional<std::string_view> old;
            if (!absent.count(etcd_record_key(prefix_, c.table, c.key))) old = get(Table::kKeysByHash, c.key);
            if (old) {
                KeyIndex was = key_index_of(*old);
                if (!next || was.by_id != next->by_id) erase(Table::kKeys, was.by_id);
                if (!next || was.by_account != next->by_account) erase(Table::kAccountKeys, was.by_account);
            }
            if (next) {
                put(Table::kKeys, next->by_id, c.key);
                put(Table::kAccountKeys, next->by_account, c.key);
            }
        }
        if (c.value) {
            put(c.table, c.key, *c.value);
        } else {
            erase(c.table, c.key);
        }
    }
    // A table guarded by "nothing after" keeps its last-key record current.
    for (const Guard &g : m.guards) {
        if (g.kind != Guard::Kind::kNoneAfter) continue;
        auto it = greatest.find(g.table);
        if (it != greatest.end() && it->second > g.key)
            writes[etcd_last_key_record(prefix_, g.table)] = it->second;
    }

    size_t bytes = 0;
    for (const etcd::Compare &c : txn.compare) bytes += c.key.size() + c.value.size() + 64;
    for (auto &[key, value] : writes) {
        bytes += key.size() + (value ? value->size() : 0) + 64;
        if (value) {
            txn.success.push_back(etcd::PutRequest{key, std::move(*value)});
        } else {
            etcd::DeleteRangeRequest d;
            d.key = key;
            txn.success.push_back(std::move(d));
        }
    }
    bytes = bytes * 4 / 3;  // base64 on the wire
    if (txn.compare.size() > EtcdBackend::kMaxTxnOps || txn.success.size() > EtcdBackend::kMaxTxnOps ||
        bytes > EtcdBackend::kMaxTxnBytes)
        throw StoreError(StoreError::Kind::kInvalid, "",
                         "this change needs " + std::to_string(txn.success.size()) + " etcd operations (" +
                             std::to_string(bytes) + " bytes); one etcd transaction holds at most " +
                             std::to_string(EtcdBackend::kMaxTxnOps) + " operations and 1.5 MiB");
    if (txn.success.empty()) return true;

    etcd::TxnResponse out;
    etcd::Status st = client_->txn(txn, out);
    if (!st.ok())
        throw StoreError(StoreError::Kind::kUnavailable, "",
                         std::string("etcd write failed (") + etcd::errc_name(st.code) + "): " +
                             st.message + "; it may or may not have been applied");
    return out.succeeded;
}

}  // namespace

std::unique_ptr<EtcdBackend> EtcdBackend::make(const EtcdBackendOptions &options, std::string &error) {
    if (!valid_etcd_prefix(options.prefix, error)) return nullptr;
    etcd::ClientOptions co;
    if (!etcd::parse_endpoints(options.endpoints, co.endpoints, error)) return nullptr;
    co.ca_file = options.ca_file;
    co.cert_file = options.cert_file;
    co.key_file = options.key_file;
    co.request_timeout = options.request_timeout;
    auto probe = etcd::Client::make(co, error);  // the options are usable
    if (!probe) return nullptr;
    auto pool = std::make_shared<ClientPool>(std::move(co));
    pool->give_back(std::move(probe));
    return std::unique_ptr<EtcdBackend>(new EtcdBackend(std::move(pool), options.prefix));
}

EtcdBackend::EtcdBackend(std::shared_ptr<ClientPool> pool, std::string prefix)
    : pool_(std::move(pool)), prefix_(std::move(prefix)) {}

std::unique_ptr<RecordReader> EtcdBackend::read() {
    return std::make_unique<EtcdAttempt>(pool_, prefix_);
}

std::unique_ptr<WriteAttempt> EtcdBackend::begin_write() {
    return std::make_unique<EtcdAttempt>(pool_, prefix_);
}

}  // namespace keyauth
