// What a Redis server (or anything that answers on its port) may send an
// edge of keyauth_shared_limits: the bytes, cut into chunks as a socket
// would, are the answer to an exchange: a new connection's (AUTH, where
// the stream ends, a publish) or a later one's (a publish, the read of the
// stream); and the same bytes as a spent batch. Never a crash, an allocation past the bounds or a
// hang; a batch that reads re-encodes to the same bytes; folding whatever
// was accepted leaves a table every key can still be checked against, and
// no key more than two bursts in debt (the fold's bound).
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gcra.h"
#include "rate_table.h"
#include "shared_exchange.h"
#include "spent_batch.h"

using namespace keyauth;

namespace {

constexpr uint64_t kNow = 1'000 * kNanosPerSecond;

void no_lock(void *) {}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const size_t chunk = 1 + data[0] % 64;
    const bool spend = data[1] & 1;
    const bool fresh = data[1] & 2;
    std::string_view in(reinterpret_cast<const char *>(data + 2), size - 2);

    static std::vector<unsigned char> mem(RateTable::kHeaderBytes + 256 * RateTable::kSlotBytes);
    if (!RateTable::format(mem.data(), mem.size())) __builtin_trap();
    RateTable &table = *RateTable::attach(mem.data(), mem.size());
    RateLock lock{no_lock, no_lock, nullptr};

    SharedSettings s;
    s.edge_id = 0x1122334455667788ULL;
    if (fresh) s.password = "pw";
    SharedExchange x(s);

    std::string err;
    ExchangeResult out;
    if (!fresh) {
        // the first exchange learns where the stream is (an empty one)
        x.begin(table);
        if (x.feed("*0\r\n", 4, err) != SharedExchange::Feed::kDone ||
            !x.finish(table, kNow, lock, out, err) || x.last_id() != "0-0") {
            __builtin_trap();
        }
    }

    // the second publishes (with spend) and reads: the fuzzed answer
    const unsigned char key[KA_ID_LEN] = {7, 7, 7, 7, 7, 7, 1, 2, 3, 4, 5, 6};
    if (spend) table.check(key, GcraParams::per_minute(60), kNow, lock, true);
    x.begin(table);
    SharedExchange::Feed f = SharedExchange::Feed::kMore;
    for (size_t at = 0; at < in.size() && f == SharedExchange::Feed::kMore; at += chunk) {
        std::string_view part = in.substr(at, chunk);
        f = x.feed(part.data(), part.size(), err);
    }
    if (f == SharedExchange::Feed::kDone) {
        if (x.finish(table, kNow, lock, out, err)) {
            if (out.folded > 0 && out.entries == 0) __builtin_trap();
            if (out.published != (spend ? 1u : 0u)) __builtin_trap();
        } else if (err.empty()) {
            __builtin_trap();
        }
    } else if (f == SharedExchange::Feed::kError && err.empty()) {
        __builtin_trap();
    }
    // whatever the answer said, no key is more than two bursts in debt: the
    // bound of one exchange (docs/shared-limits.md), 120 s at any rate
    RateCheck after = table.check(key, GcraParams::per_minute(60), kNow, lock, false);
    if (after.decision.reset_ns > 2 * kNanosPerMinute) __builtin_trap();

    std::string batch;
    if (read_spent_batch(in, [&](const SpentEntry &e) { append_spent(batch, e); })) {
        if (batch != in) __builtin_trap();
    }
    return 0;
}
