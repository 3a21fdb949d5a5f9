// The console API's handlers against a real store, without HTTP, on both
// backends: LMDB (single host) and etcd (many edges, a real member on
// loopback), since the API must not change with the mode.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "console_api.h"
#include "etcd_backend.h"
#include "etcd_cluster.h"
#include "temp_dir.h"

namespace keyauth::testing {

using nlohmann::json;

enum class Backend { kLmdb, kEtcd };

// One etcd member for every test of the program; each test has its own prefix.
inline EtcdCluster &shared_etcd() {
    static auto *cluster = new EtcdCluster(1);
    return *cluster;
}

// A backend on the shared member under `prefix` (two at one prefix: two writers of one store).
inline std::unique_ptr<StoreBackend> etcd_backend_at(const std::string &prefix) {
    auto &cluster = shared_etcd();
    if (!cluster.ok()) throw std::runtime_error("etcd: " + cluster.error());
    EtcdBackendOptions o;
    o.endpoints = cluster.endpoints();
    o.prefix = prefix;
    std::string error;
    auto b = EtcdBackend::make(o, error);
    if (!b) throw std::runtime_error(error);
    return b;
}

inline std::unique_ptr<StoreBackend> backend_for(Backend kind, TempDir &dir) {
    if (kind == Backend::kLmdb) return std::make_unique<LmdbBackend>(dir.sub("db"));
    static int tests = 0;
    return etcd_backend_at("/console-test/" + std::to_string(++tests));
}

class ConsoleApiTest : public ::testing::TestWithParam<Backend> {
protected:
    TempDir dir;
    Store store{backend_for(GetParam(), dir)};
    ConsoleApi api{store};
    CreatedAccount alice = store.create_account("alice", 100);
    CreatedAccount bob = store.create_account("bob", 100);

    // A console request, with `who`'s token (none: no Authorization).
    static HttpRequest request(const std::string &method, const std::string &path,
                               const CreatedAccount *who, const std::string &body = "",
                               const std::string &type = "application/json") {
        HttpRequest r;
        r.method = method;
        r.path = path;
        if (who) {
            r.has_authorization = true;
            r.authorization = "Bearer " + who->console_token;
        }
        r.content_type = type;
        r.client_address = "203.0.113.7";
        r.body = body;
        return r;
    }
    HttpResponse call(const std::string &method, const std::string &path,
                         const CreatedAccount *who, const std::string &body = "",
                         const std::string &type = "application/json") {
        return api.handle(request(method, path, who, body, type));
    }
    HttpResponse create(const CreatedAccount &who, const std::string &body) {
        return call("POST", "/v1/keys", &who, body);
    }
    static json parsed(const HttpResponse &r) { return json::parse(r.body); }
    static std::string field_of(const HttpResponse &r) {
        return parsed(r)["error"].value("field", "");
    }
};

inline const auto kBothBackends = ::testing::Values(Backend::kLmdb, Backend::kEtcd);

inline std::string backend_name(const ::testing::TestParamInfo<Backend> &info) {
    return info.param == Backend::kLmdb ? "Lmdb" : "Etcd";
}

}  // namespace keyauth::testing
