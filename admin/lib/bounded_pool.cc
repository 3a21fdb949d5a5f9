#include "bounded_pool.h"

namespace keyauth {

BoundedPool::BoundedPool(size_t threads, size_t queue_limit) : queue_limit_(queue_limit) {
    threads_.reserve(threads);
    for (size_t i = 0; i < threads; i++) threads_.emplace_back([this] { run(); });
}

BoundedPool::~BoundedPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    work_.notify_all();
    for (auto &t : threads_) t.join();
}

bool BoundedPool::try_submit(std::function<void()> task) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_ || queue_.size() >= queue_limit_) return false;
        queue_.push_back(std::move(task));
    }
    work_.notify_one();
    return true;
}

bool BoundedPool::drain_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    work_.notify_all();
    return idle_.wait_until(lock, deadline, [this] { return queue_.empty() && busy_ == 0; });
}

size_t BoundedPool::queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

size_t BoundedPool::busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return busy_;
}

void BoundedPool::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left to do
        std::function<void()> task = std::move(queue_.front());
        queue_.pop_front();
        busy_++;
        lock.unlock();
        task();  // tasks catch their own exceptions (ConsoleApi::handle is noexcept)
        task = nullptr;
        lock.lock();
        busy_--;
        if (queue_.empty() && busy_ == 0) idle_.notify_all();
    }
}

}  // namespace keyauth
