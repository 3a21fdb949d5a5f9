// A StoreBackend that lets another writer in between a write's reads and
// its apply, once: how a test makes the race a guard must catch.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "store_backend.h"

namespace keyauth::testing {

// A backend whose first write attempt lets `race` run (another writer, on
// the same etcd prefix) between its reads and its apply.
class RacingBackend : public StoreBackend {
public:
    RacingBackend(std::unique_ptr<StoreBackend> inner, std::function<void()> race)
        : inner_(std::move(inner)), race_(std::move(race)) {}
    std::unique_ptr<RecordReader> read() override { return inner_->read(); }
    std::unique_ptr<WriteAttempt> begin_write() override {
        struct Attempt : WriteAttempt {
            std::unique_ptr<WriteAttempt> inner;
            std::function<void()> race;
            std::optional<std::string_view> get(Table t, std::string_view k) override { return inner->get(t, k); }
            void scan(Table t, std::string_view w, std::string_view f, const Visit &v) override {
                inner->scan(t, w, f, v);
            }
            std::optional<std::string> last_key(Table t) override { return inner->last_key(t); }
            bool apply(const Mutation &m) override {
                if (race) race();
                return inner->apply(m);
            }
        };
        auto a = std::make_unique<Attempt>();
        a->inner = inner_->begin_write();
        a->race = std::exchange(race_, nullptr);
        return a;
    }
    void set_write_wait_limit(std::chrono::milliseconds limit) override { inner_->set_write_wait_limit(limit); }
    size_t max_keys_per_write() const override { return inner_->max_keys_per_write(); }

private:
    std::unique_ptr<StoreBackend> inner_;
    std::function<void()> race_;
};

}  // namespace keyauth::testing
