// The store a model-based test drives, on either backend, and the edge that
// reads it: on one host the store's own LMDB; on etcd a mirror of the test's
// prefix, rebuilt at one revision and swapped in the way keyauth-syncd does,
// every time the test looks through the edge.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "console_fixture.h"
#include "etcd_client.h"
#include "keyauth_core.h"
#include "mirror.h"
#include "record_changes.h"

namespace keyauth::testing {

class ModelStore {
public:
    // `tag` tells this instance's etcd prefix from others' (a seed, say).
    ModelStore(Backend kind, const std::string &tag)
        : kind_(kind), prefix_("/model/" + tag + "-" + std::to_string(++instances_)),
          store_(make_backend()) {
        // On one host the edge opens the store's own files, before the store
        // reads anything: the second environment of a process on one lock
        // file resets its reader table (POSIX locks are the process's), and
        // would take the reader slot a read of the first one kept.
        if (kind_ == Backend::kLmdb) edge();
    }
    ~ModelStore() {
        if (edge_) ka_edge_close(edge_);
    }
    ModelStore(const ModelStore &) = delete;
    ModelStore &operator=(const ModelStore &) = delete;

    Store &store() { return store_; }

    // The edge, seeing every write made so far.
    ka_edge_t *edge() {
        if (kind_ == Backend::kLmdb && edge_) return edge_;
        if (kind_ == Backend::kEtcd) refresh_mirror();
        if (edge_) ka_edge_close(edge_);
        char error[256] = "";
        const std::string path = dir_.path() + (kind_ == Backend::kLmdb ? "/db" : "/edge");
        edge_ = ka_edge_open(path.c_str(), error, sizeof error);
        if (!edge_) throw std::runtime_error(std::string("ka_edge_open: ") + error);
        return edge_;
    }

private:
    std::unique_ptr<StoreBackend> make_backend() {
        if (kind_ == Backend::kLmdb) return std::make_unique<LmdbBackend>(dir_.sub("db"));
        auto b = etcd_backend_at(prefix_);
        etcd::ClientOptions co;
        co.endpoints = shared_etcd().endpoint_list();
        std::string error;
        client_ = etcd::Client::make(co, error);
        if (!client_) throw std::runtime_error(error);
        mirror_ = std::make_unique<syncd::Mirror>(dir_.sub("edge"), 0);
        return b;
    }

    void refresh_mirror() {
        auto rebuild = mirror_->begin_rebuild();
        int64_t revision = 0;
        etcd::RangeRequest req;
        req.key = syncd::watched_prefix(prefix_);
        req.range_end = syncd::watched_end(prefix_);
        etcd::Status st = client_->range_all(
            req, 1000,
            [&](const etcd::RangeResponse &page) {
                rebuild->add(syncd::batch_of_kvs(prefix_, page.kvs).changes);
                return true;
            },
            &revision);
        if (!st.ok()) throw std::runtime_error("etcd range: " + st.message);
        mirror_->finish_rebuild(std::move(rebuild), syncd::MirrorMark{revision, 1});
    }

    Backend kind_;
    // memory-backed where there is one: a model checks rules, not fsync
    TempDir dir_{std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                            : std::filesystem::temp_directory_path().string()};
    std::string prefix_;
    static inline int instances_ = 0;
    std::unique_ptr<etcd::Client> client_;
    std::unique_ptr<syncd::Mirror> mirror_;
    Store store_;
    ka_edge_t *edge_ = nullptr;
};

}  // namespace keyauth::testing
