// A round every interval, the first at once, until stop(): the quota
// exchange's rounds through etcd and through Redis, each on its thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace keyauth::syncd {

class IntervalLoop {
public:
    // round(now_ms) with the Unix time in ms, every `interval` from the
    // start of the one before (a round longer than that: the next at once).
    template <class Round>
    void run(std::chrono::milliseconds interval, Round &&round) {
        auto next = std::chrono::steady_clock::now();
        for (;;) {
            {
                std::unique_lock<std::mutex> lock(mu_);
                wake_.wait_until(lock, next, [this] { return stop_; });
                if (stop_) return;
            }
            next = std::chrono::steady_clock::now() + interval;
            round(std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
        }
    }
    // Ends run() before its next round (not a round under way).
    void stop() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        wake_.notify_all();
    }

private:
    std::mutex mu_;
    std::condition_variable wake_;
    bool stop_ = false;
};

}  // namespace keyauth::syncd
