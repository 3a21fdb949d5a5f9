#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "bounded_pool.h"

namespace keyauth {
namespace {

using namespace std::chrono_literals;

TEST(BoundedPool, RunsEveryAcceptedTask) {
    std::atomic<int> ran{0};
    {
        BoundedPool pool(3, 1000);
        for (int i = 0; i < 500; i++) ASSERT_TRUE(pool.try_submit([&] { ran++; }));
        EXPECT_TRUE(pool.drain_until(std::chrono::steady_clock::now() + 30s));
    }
    EXPECT_EQ(ran.load(), 500);
}

TEST(BoundedPool, RefusesAtOnceWhenTheQueueIsFull) {
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    std::atomic<int> started{0};
    BoundedPool pool(2, 3);
    // two workers busy, three waiting: the queue is full
    for (int i = 0; i < 2; i++) {
        ASSERT_TRUE(pool.try_submit([&, gate] {
            started++;
            gate.wait();
        }));
    }
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (started < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    ASSERT_EQ(started.load(), 2);
    for (int i = 0; i < 3; i++) ASSERT_TRUE(pool.try_submit([gate] { gate.wait(); }));
    EXPECT_EQ(pool.queued(), 3u);
    EXPECT_EQ(pool.busy(), 2u);
    EXPECT_FALSE(pool.try_submit([] {})) << "a sixth task waits for nobody: refused";
    release.set_value();
    EXPECT_TRUE(pool.drain_until(std::chrono::steady_clock::now() + 30s));
    EXPECT_FALSE(pool.try_submit([] {})) << "nothing is accepted after a drain";
}

TEST(BoundedPool, DrainReportsATaskStillRunning) {
    std::promise<void> release;
    std::shared_future<void> gate = release.get_future().share();
    BoundedPool pool(1, 1);
    ASSERT_TRUE(pool.try_submit([gate] { gate.wait(); }));
    EXPECT_FALSE(pool.drain_until(std::chrono::steady_clock::now() + 50ms));
    release.set_value();
    EXPECT_TRUE(pool.drain_until(std::chrono::steady_clock::now() + 30s));
}

}  // namespace
}  // namespace keyauth
