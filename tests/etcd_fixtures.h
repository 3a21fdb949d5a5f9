// The answers recorded from real etcd members under tests/fixtures/etcd/,
// for the codec's tests (which run from the repository root).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace keyauth::testing {

inline std::string etcd_fixture(const std::string &name) {
    std::ifstream in("tests/fixtures/etcd/" + name, std::ios::binary);
    EXPECT_TRUE(in.good()) << "missing fixture " << name << " (tests run from the repository root)";
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The lines of a recorded stream (.ndjson), without their '\n'.
inline std::vector<std::string> fixture_lines(const std::string &text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

}  // namespace keyauth::testing
