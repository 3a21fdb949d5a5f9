// A store an older keyauthctl wrote (tests/fixtures/store-vN: data.mdb and
// fixture.json naming its ids and test secrets), copied for one test, with
// one edge that authenticates against it.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "keyauth_core.h"
#include "temp_dir.h"

namespace keyauth::testing {

class StoreFixture : public ::testing::Test {
protected:
    explicit StoreFixture(std::string name) : name_(std::move(name)) {}

    TempDir dir;
    std::string path = dir.sub("db");
    nlohmann::json fixture;

    void SetUp() override {
        const std::string from = "tests/fixtures/" + name_;
        std::filesystem::create_directory(path);
        std::filesystem::copy_file(from + "/data.mdb", path + "/data.mdb");
        std::filesystem::permissions(path + "/data.mdb", std::filesystem::perms::owner_read |
                                                             std::filesystem::perms::owner_write);
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        std::ifstream in(from + "/fixture.json");
        fixture = nlohmann::json::parse(in);
    }

    // One edge for the test, opened at its first use and kept: closing an
    // environment drops the process's locks on its lock file, under any
    // other handle too. It is the edge that follows an upgrade.
    ka_edge_t *edge = nullptr;
    void TearDown() override { ka_edge_close(edge); }

    ka_verdict_e edge_verdict(const std::string &secret, ka_auth_result_t *out = nullptr,
                              const char *scope = "ip:read") {
        if (!edge) {
            char err[256] = "";
            edge = ka_edge_open(path.c_str(), err, sizeof err);
            EXPECT_NE(edge, nullptr) << err;
            if (!edge) return KA_AUTH_UNAVAILABLE;
        }
        const std::string header = "Bearer " + secret;
        ka_str_t s{scope, std::strlen(scope)};
        ka_auth_result_t r;
        ka_edge_authenticate(edge, header.data(), header.size(), nullptr, &s, 1, wall_clock_ms(), &r);
        if (out) *out = r;
        return r.verdict;
    }

private:
    std::string name_;
};

}  // namespace keyauth::testing
