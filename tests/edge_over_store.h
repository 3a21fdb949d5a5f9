// An edge over a real LMDB store that the real Store writes, with a door
// behind the Store's back: a record rewritten or erased as a writer of
// another build (or a hand) would, for what the edge does when the store
// is not as this build's writers leave it.
#pragma once

#include <gtest/gtest.h>
#include <lmdb.h>

#include <functional>
#include <memory>
#include <string>

#include "keyauth_core.h"
#include "lmdb_backend.h"
#include "mutation.h"
#include "store.h"
#include "temp_dir.h"

namespace keyauth::testing {

class EdgeOverStore : public ::testing::Test {
protected:
    TempDir dir;
    std::string path = dir.sub("db");
    LmdbBackend *backend = nullptr;  // the store's own
    Store store{open_backend()};
    ka_edge_t *edge = nullptr;

    void SetUp() override {
        char err[256] = "";
        edge = ka_edge_open(path.c_str(), err, sizeof err);
        ASSERT_NE(edge, nullptr) << err;
    }
    void TearDown() override { ka_edge_close(edge); }

    // The edge's check of a key, as the access phase makes it: no address,
    // no scope required.
    ka_auth_result_t check(const std::string &secret) {
        const std::string header = "Bearer " + secret;
        ka_auth_result_t r;
        ka_edge_authenticate(edge, header.data(), header.size(), nullptr, nullptr, 0, wall_clock_ms(), &r);
        return r;
    }

    // The value of `key` in the table, passed to edit and put back, in one
    // write transaction of the store's environment.
    void edit_behind_store(MDB_dbi dbi, const void *key, size_t key_len, const std::function<void(std::string &)> &edit) {
        backend->write([&](MDB_txn *txn) {
            MDB_val k{key_len, const_cast<void *>(key)}, v{};
            EXPECT_EQ(mdb_get(txn, dbi, &k, &v), 0);
            std::string value(static_cast<const char *>(v.mv_data), v.mv_size);
            edit(value);
            v = {value.size(), value.data()};
            EXPECT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
            return true;
        });
    }
    void erase_behind_store(MDB_dbi dbi, const void *key, size_t key_len) {
        backend->write([&](MDB_txn *txn) {
            MDB_val k{key_len, const_cast<void *>(key)};
            EXPECT_EQ(mdb_del(txn, dbi, &k, nullptr), 0);
            return true;
        });
    }
    // key_records holds a key's hash, then its record
    MDB_dbi key_records() const { return backend->tables().key_records; }
    MDB_dbi accounts() const { return backend->tables()[Table::kAccounts]; }

private:
    std::unique_ptr<StoreBackend> open_backend() {
        auto b = std::make_unique<LmdbBackend>(path);
        backend = b.get();
        return b;
    }
};

}  // namespace keyauth::testing
