// A fixed set of worker threads with a bounded queue: a task that finds the
// queue full is refused at once (the caller answers 503), so a flood can
// neither grow memory nor make a later request wait behind an unbounded line.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace keyauth {

class BoundedPool {
public:
    BoundedPool(size_t threads, size_t queue_limit);
    ~BoundedPool();  // finishes every accepted task, then joins
    BoundedPool(const BoundedPool &) = delete;
    BoundedPool &operator=(const BoundedPool &) = delete;

    // False when the queue already holds queue_limit tasks, or after stop().
    bool try_submit(std::function<void()> task);

    // No new tasks; queued and running ones still finish. Returns true if
    // all have finished within the deadline.
    bool drain_until(std::chrono::steady_clock::time_point deadline);

    size_t queued() const;
    size_t busy() const;

private:
    void run();

    const size_t queue_limit_;
    mutable std::mutex mu_;
    std::condition_variable work_;
    std::condition_variable idle_;
    std::deque<std::function<void()>> queue_;
    size_t busy_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace keyauth
