// How a model-based test runs its seeded sequences, the same for every
// model: VARS_SEED=N replays one sequence, VARS_SEQUENCES sets how many run,
// VARS_BASE the first seed (random by default), VARS_VERBOSE=1 prints each
// sequence's steps; a failure prints its steps and how to replay it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "console_fixture.h"

namespace keyauth::testing {

inline uint64_t model_env(const std::string &name, uint64_t fallback) {
    const char *v = std::getenv(name.c_str());
    return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// Harness(kind, seed) with run(steps) -> bool, failure() and log().
template <class Harness>
void run_model(Backend kind, const std::string &vars, uint64_t sequences, int steps, const std::string &test) {
    const uint64_t one = model_env(vars + "_SEED", 0);
    if (one) sequences = 1;
    else sequences = model_env(vars + "_SEQUENCES", sequences);
    const uint64_t base = model_env(vars + "_BASE", uint64_t(std::random_device{}()) << 16);
    const bool verbose = model_env(vars + "_VERBOSE", 0) != 0;
    for (uint64_t i = 0; i < sequences; i++) {
        const uint64_t seed = one ? one : base + i;
        Harness h(kind, seed);
        const bool passed = h.run(steps);
        if (verbose || !passed) std::cout << "seed " << seed << ":\n" << h.log();
        ASSERT_TRUE(passed) << h.failure() << "\nreplay: " << vars << "_SEED=" << seed
                            << " build/unit_tests --gtest_filter='*" << test << "*"
                            << (kind == Backend::kLmdb ? "Lmdb" : "Etcd") << "*'";
    }
}

}  // namespace keyauth::testing
