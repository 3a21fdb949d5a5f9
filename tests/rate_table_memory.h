// A rate table in ordinary memory for tests, with a mutex as the zone lock.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "rate_table.h"

namespace keyauth::testing {

struct RateTableMemory {
    explicit RateTableMemory(size_t slots) : mem(RateTable::kHeaderBytes + slots * RateTable::kSlotBytes) {
        EXPECT_TRUE(RateTable::format(mem.data(), mem.size()));
        table = RateTable::attach(mem.data(), mem.size());
    }

    std::vector<unsigned char> mem;
    RateTable *table;
    std::mutex mu;
    RateLock lock{[](void *m) { static_cast<std::mutex *>(m)->lock(); },
                  [](void *m) { static_cast<std::mutex *>(m)->unlock(); }, &mu};
};

}  // namespace keyauth::testing
