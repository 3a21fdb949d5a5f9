#include "lmdb_backend.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "key_slots_writer.h"
#include "keyauth_schema.h"
#include "le.h"
#include "lmdb_keys.h"
#include "lmdb_write_txn.h"
#include "permissions.h"
#include "schema_upgrade.h"
#include "store_error.h"

namespace keyauth {
namespace {

// Readers of old and new nginx workers overlap during a reload.
constexpr unsigned kMaxReaders = 1024;
constexpr mode_t kDirMode = LmdbBackend::kDirMode;
constexpr mode_t kLockMode = LmdbBackend::kLockMode;

bool exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

void mkdir_p(std::string path) {
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    std::string cur;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        cur = path.substr(0, pos);
        if (cur.empty()) continue;
        const bool last = pos == std::string::npos;
        if (::mkdir(cur.c_str(), last ? kDirMode : 0755) == 0) {
            if (last) ::chmod(cur.c_str(), kDirMode);  // not narrowed by the umask
        } else if (errno != EEXIST) {
            throw std::runtime_error("cannot create directory " + cur + ": " + std::strerror(errno));
        }
    }
}

// LMDB would create lock.mdb with data.mdb's mode, which the readers' group
// cannot write; and in a 2750 directory they cannot create it themselves.
void create_lock_file(const std::string &dir) {
    const std::string path = dir + "/lock.mdb";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, kLockMode);
    if (fd < 0) {
        if (errno == EEXIST) return;
        throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
    }
    const bool ok = ::fchmod(fd, kLockMode) == 0;  // not narrowed by the umask
    const int why = errno;
    ::close(fd);
    if (!ok) throw std::runtime_error("cannot set the mode of " + path + ": " + std::strerror(why));
}

MDB_val val(std::string_view s) { return MDB_val{s.size(), const_cast<char *>(s.data())}; }
std::string_view view(const MDB_val &v) { return {static_cast<const char *>(v.mv_data), v.mv_size}; }

// The reads of RecordReader over any transaction of the environment. The
// tables keys_by_hash (hash -> record) and keys (id -> hash) are views of
// key_records through key_slots (lmdb_keys.h). Scanning keys_by_hash sorts
// every key by hash in memory: only dumps do it (the Store lists keys through
// account_keys).
template <class Interface>
class TxnReader : public Interface {
public:
    std::optional<std::string_view> get(Table table, std::string_view key) override {
        if (table == Table::kKeysByHash) {
            auto stored = key_by_hash(handle(), tables_.key_records, tables_.key_slots, key);
            return stored ? std::optional(stored->record) : std::nullopt;
        }
        if (table == Table::kKeys) {
            auto stored = key_by_id(handle(), tables_.key_records, key);
            return stored ? std::optional(stored->hash) : std::nullopt;
        }
        MDB_val k = val(key), v;
        if (!lmdb::dbi_get(handle(), tables_[table], &k, &v)) return std::nullopt;
        return view(v);
    }

    void scan(Table table, std::string_view within, std::string_view from,
              const RecordReader::Visit &visit) override {
        if (from < within) from = within;
        if (table == Table::kKeysByHash) return scan_by_hash(within, from, visit);
        if (table == Table::kKeys) {
            return scan_raw(tables_.key_records, within, from, [&](std::string_view id, std::string_view value) {
                auto stored = split_key_records_value(value);
                return !stored || visit(id, stored->hash);
            });
        }
        scan_raw(tables_[table], within, from, visit);
    }

    std::optional<std::string> last_key(Table table) override {
        if (table == Table::kKeysByHash) throw std::logic_error("keys_by_hash has no last key in LMDB");
        auto cur = lmdb::cursor::open(handle(), table == Table::kKeys ? tables_.key_records : tables_[table]);
        MDB_val k, v;
        if (!lmdb::cursor_get(cur.handle(), &k, &v, MDB_LAST)) return std::nullopt;
        return std::string(view(k));
    }

protected:
    explicit TxnReader(const LmdbTables &tables) : tables_(tables) {}
    virtual MDB_txn *handle() const = 0;
    const LmdbTables tables_;

private:
    template <class Visit>
    void scan_raw(MDB_dbi dbi, std::string_view within, std::string_view from, Visit &&visit) {
        auto cur = lmdb::cursor::open(handle(), dbi);
        MDB_val k = val(from), v;
        // SET_RANGE refuses an empty key: from "" is from the first record
        bool ok = lmdb::cursor_get(cur.handle(), &k, &v, from.empty() ? MDB_FIRST : MDB_SET_RANGE);
        while (ok && view(k).substr(0, within.size()) == within && visit(view(k), view(v)))
            ok = lmdb::cursor_get(cur.handle(), &k, &v, MDB_NEXT);
    }

    void scan_by_hash(std::string_view within, std::string_view from, const RecordReader::Visit &visit) {
        std::vector<StoredKey> keys;
        scan_raw(tables_.key_records, "", "", [&](std::string_view, std::string_view value) {
            auto stored = split_key_records_value(value);
            if (stored && stored->hash.substr(0, within.size()) == within && stored->hash >= from)
                keys.push_back(*stored);
            return true;
        });
        std::sort(keys.begin(), keys.end(), [](const StoredKey &a, const StoredKey &b) { return a.hash < b.hash; });
        for (const StoredKey &key : keys) {
            if (!visit(key.hash, key.record)) break;
        }
    }
};

// Begins a transaction (`begin`) under a hold of the map. Another process
// may have grown the map past this one's (MDB_MAP_RESIZED): adopt its size,
// which needs every hold of this process gone, this one too, and begin again.
template <class Begin>
void begin_held(LmdbMap &map, LmdbMap::Hold &hold, Begin &&begin) {
    for (;;) {
        hold = map.hold();
        try {
            begin();
            return;
        } catch (const lmdb::error &e) {
            hold = LmdbMap::Hold();
            if (e.code() != MDB_MAP_RESIZED) throw;
        }
        map.adopt();
    }
}

// One commit that changes nothing a reader sees: the schema version written
// again with its own bytes. Best effort (see release_frees_of).
void commit_unchanged(MDB_env *env, LmdbMap &map, const LmdbTables &tables) noexcept {
    try {
        LmdbMap::Hold hold;
        std::optional<WriteTxn> txn;
        begin_held(map, hold, [&] { txn.emplace(env); });
        MDB_val k = val(KA_META_SCHEMA_VERSION), v;
        if (!lmdb::dbi_get(txn->handle(), tables[Table::kMeta], &k, &v)) return;
        const std::string same(static_cast<const char *>(v.mv_data), v.mv_size);
        MDB_val nv = val(same);
        lmdb::dbi_put(txn->handle(), tables[Table::kMeta], &k, &nv, 0);
        txn->commit();
    } catch (...) {
        // the frees stay unused until some later commit: nothing is lost
    }
}

// The schema this process opened the store at, in every transaction it begins:
// a newer writer that moved the store on while this process ran (an upgrade
// in place, as 2 -> 3 was) leaves tables this process no longer reads or
// writes right. Refused as unavailable, naming what to do, rather than read
// as "no such key" or half written.
void require_schema(MDB_txn *txn, const LmdbTables &tables, const LmdbMap &map) {
    MDB_val k = val(KA_META_SCHEMA_VERSION), v;
    uint32_t version = 0;
    if (lmdb::dbi_get(txn, tables[Table::kMeta], &k, &v) && v.mv_size == 4)
        version = load_le<uint32_t>(static_cast<unsigned char *>(v.mv_data));
    if (version == KA_SCHEMA_VERSION) return;
    throw StoreError(StoreError::Kind::kUnavailable, "",
                     "the store " + map.path() + " is at schema " + std::to_string(version) +
                         " now, not the " + std::to_string(KA_SCHEMA_VERSION) +
                         " this process opened it at: another writer moved it on; restart this "
                         "process with that writer's build");
}

class LmdbReader final : public TxnReader<RecordReader> {
public:
    LmdbReader(MDB_env *env, LmdbMap &map, const LmdbTables &tables) : TxnReader(tables) {
        begin_held(map, hold_, [&] { txn_.emplace(lmdb::txn::begin(env, nullptr, MDB_RDONLY)); });
        require_schema(txn_->handle(), tables, map);
    }

private:
    MDB_txn *handle() const override { return txn_->handle(); }
    LmdbMap::Hold hold_;  // before txn_: released after it ends
    std::optional<lmdb::txn> txn_;
};

class LmdbWrite final : public TxnReader<WriteAttempt> {
public:
    LmdbWrite(MDB_env *env, LmdbMap &map, const LmdbTables &tables, std::chrono::milliseconds wait_limit)
        : TxnReader(tables), env_(env), map_(map), wait_limit_(wait_limit) {
        begin();
    }

    // A mutation that fills the map is applied again, guards first, in a new
    // transaction once the map has grown: it owns all it writes.
    bool apply(const Mutation &m) override {
        for (;;) {
            try {
                for (const Guard &g : m.guards) {
                    if (!holds(g)) return false;
                }
                if (m.changes.empty()) return true;  // nothing to commit (or to fsync)
                apply_records(txn_->handle(), tables_, m.changes);
                txn_->commit();
                if (m.changes.size() >= LmdbBackend::kLargeWrite) {
                    txn_.reset();
                    hold_ = LmdbMap::Hold();  // the small commit takes its own
                    commit_unchanged(env_, map_, tables_);
                }
                return true;
            } catch (const lmdb::map_full_error &) {
                txn_.reset();  // aborted, then the hold given back: grow needs the map alone
                hold_ = LmdbMap::Hold();
            }
            map_.grow(filled_);
            begin();
        }
    }

private:
    MDB_txn *handle() const override { return txn_->handle(); }

    void begin() {
        begin_held(map_, hold_, [&] { txn_.emplace(env_, wait_limit_); });
        filled_ = map_.size();
        require_schema(txn_->handle(), tables_, map_);
    }

    bool holds(const Guard &g) {
        switch (g.kind) {
        case Guard::Kind::kEquals: {
            auto v = get(g.table, g.key);
            return v && *v == g.value;
        }
        case Guard::Kind::kAbsent: return !get(g.table, g.key);
        case Guard::Kind::kNoneAfter: {
            auto last = last_key(g.table);  // std::string orders bytes as LMDB does
            return !last || *last <= g.key;
        }
        // this attempt has been the one writer since its first read
        case Guard::Kind::kUnchanged: return true;
        }
        return false;
    }

    MDB_env *env_;
    LmdbMap &map_;
    std::chrono::milliseconds wait_limit_;
    size_t filled_ = 0;   // the map this transaction began with
    LmdbMap::Hold hold_;  // before txn_: released after it ends
    std::optional<WriteTxn> txn_;
};

}  // namespace

LmdbBackend::LmdbBackend(const std::string &path, size_t map_size)
    : env_(lmdb::env::create()), map_(std::make_unique<LmdbMap>(env_.handle(), path)) {
    mkdir_p(path);
    require_private_store(path);  // before LMDB opens (or creates) a file
    require_writable_store(path);
    const bool fresh = !exists(path + "/data.mdb");
    create_lock_file(path);
    env_.set_max_dbs(KA_DB_COUNT);
    env_.set_max_readers(kMaxReaders);
    // No size before opening: LMDB then maps what the store was last written
    // with. The larger of that and map_size is kept, so that two writers asking
    // for different sizes (keyauthd --map-size, keyauthctl) never shrink the
    // map under data the other one wrote.
    env_.open(path.c_str(), 0, kDataMode);
    const size_t wanted = map_size != 0 ? map_size : fresh ? kDefaultMapSize : 0;
    MDB_envinfo info;
    mdb_env_info(env_.handle(), &info);
    if (info.me_mapsize < wanted) env_.set_mapsize(wanted);
    if (fresh) ::chmod((path + "/data.mdb").c_str(), kDataMode);  // not narrowed by the umask
    int dead = 0;
    mdb_reader_check(env_.handle(), &dead);

    // The schema version is the environment's own, never a mutation's record.
    // A store of schema 1 or 2 is upgraded here, in one transaction: the edge
    // reads each, the writers of older schemas refuse the result.
    write_any_schema([&](MDB_txn *txn) {
        tables_ = open_tables(txn);
        MDB_val k = val(KA_META_SCHEMA_VERSION), v;
        uint32_t version = 0;
        const bool versioned = lmdb::dbi_get(txn, tables_[Table::kMeta], &k, &v);
        if (versioned) {
            version = v.mv_size == 4 ? load_le<uint32_t>(static_cast<unsigned char *>(v.mv_data)) : 0;
            if (version < KA_SCHEMA_VERSION_MIN_READ || version > KA_SCHEMA_VERSION) {
                throw StoreError(StoreError::Kind::kCorrupt, "",
                                 "schema version " + std::to_string(version) + " of " + path +
                                     " is not supported (this build writes " +
                                     std::to_string(KA_SCHEMA_VERSION) + ")");
            }
        }
        MDB_val hk = val(KA_KEY_SLOTS_HEADER_KEY), hv;
        if (version != KA_SCHEMA_VERSION || !lmdb::dbi_get(txn, tables_.key_slots, &hk, &hv)) {
            if (version < KA_SCHEMA_VERSION) move_keys_to_schema_3(txn, tables_);
            rebuild_key_slots(txn, tables_.key_records, tables_.key_slots);
            unsigned char buf[4];
            store_le<uint32_t>(buf, KA_SCHEMA_VERSION);
            MDB_val nv{sizeof buf, buf};
            lmdb::dbi_put(txn, tables_[Table::kMeta], &k, &nv, 0);
        }
        return true;
    });
}

bool LmdbBackend::write(const std::function<bool(MDB_txn *)> &body) {
    return write_any_schema([&](MDB_txn *txn) {
        require_schema(txn, tables_, *map_);
        return body(txn);
    });
}

bool LmdbBackend::write_any_schema(const std::function<bool(MDB_txn *)> &body) {
    LmdbMap::Hold hold;
    std::optional<WriteTxn> txn;
    for (;;) {
        begin_held(*map_, hold, [&] { txn.emplace(env_.handle(), wait_limit_); });
        const size_t filled = map_->size();
        try {
            if (!body(txn->handle())) return false;
            txn->commit();
            return true;
        } catch (const lmdb::map_full_error &) {
            txn.reset();  // aborted, then the hold given back: grow needs the map alone
            hold = LmdbMap::Hold();
        }
        map_->grow(filled);
    }
}

void LmdbBackend::release_frees_of(size_t records) noexcept {
    if (records >= kLargeWrite) commit_unchanged(env_.handle(), *map_, tables_);
}

std::unique_ptr<RecordReader> LmdbBackend::read() {
    return std::make_unique<LmdbReader>(env_.handle(), *map_, tables_);
}

std::unique_ptr<WriteAttempt> LmdbBackend::begin_write() {
    return std::make_unique<LmdbWrite>(env_.handle(), *map_, tables_, wait_limit_);
}

StoreGauges LmdbBackend::gauges() {
    StoreGauges g;
    LmdbMap::Hold hold;  // env info reads the map too
    std::optional<lmdb::txn> txn;
    begin_held(*map_, hold, [&] { txn.emplace(lmdb::txn::begin(env_.handle(), nullptr, MDB_RDONLY)); });
    MDB_envinfo info;
    MDB_stat env_stat;
    if (mdb_env_info(env_.handle(), &info) == 0 && mdb_env_stat(env_.handle(), &env_stat) == 0) {
        g.map_bytes = info.me_mapsize;
        g.used_bytes = (static_cast<uint64_t>(info.me_last_pgno) + 1) * env_stat.ms_psize;
    }
    MDB_stat st;
    if (mdb_stat(txn->handle(), tables_.key_records, &st) == 0) g.keys = st.ms_entries;
    if (mdb_stat(txn->handle(), tables_[Table::kAccounts], &st) == 0) g.accounts = st.ms_entries;
    return g;
}

}  // namespace keyauth
