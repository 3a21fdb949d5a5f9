// The shared-limits half of the C API in keyauth_core.h: no exception
// crosses it (a failure is a return value and a message).
#include <openssl/rand.h>

#include <memory>
#include <string>

#include "c_api_support.h"
#include "keyauth_core.h"
#include "le.h"
#include "shared_exchange.h"

using keyauth::ExchangeResult;
using keyauth::RateTable;
using keyauth::say;
using keyauth::SharedExchange;
using keyauth::SharedSettings;

struct ka_shared_s {
    std::unique_ptr<SharedExchange> exchange;
};

namespace {

std::string string_of(ka_str_t s) { return std::string(s.data ? s.data : "", s.len); }

}  // namespace

extern "C" {

uint64_t ka_random_u64(void) {
    unsigned char b[8] = {0};
    if (RAND_bytes(b, sizeof(b)) != 1) {
        // no secure randomness: an id still unlikely to clash on one host
        keyauth::store_le<uint64_t>(b, ka_monotonic_ns() * 0x9e3779b97f4a7c15ULL);
    }
    return keyauth::load_le<uint64_t>(b);
}

ka_shared_t *ka_shared_create(ka_str_t stream, ka_str_t user, ka_str_t password,
                              uint64_t edge_id, char *err, size_t err_len) {
    try {
        SharedSettings s;
        s.stream = string_of(stream);
        s.user = string_of(user);
        s.password = string_of(password);
        s.edge_id = edge_id;
        auto x = std::make_unique<ka_shared_s>();
        x->exchange = std::make_unique<SharedExchange>(std::move(s));
        return x.release();
    } catch (const std::exception &e) {
        say(err, err_len, e.what());
        return nullptr;
    } catch (...) {
        say(err, err_len, "cannot set up the shared limits");
        return nullptr;
    }
}

void ka_shared_destroy(ka_shared_t *x) { delete x; }

void ka_shared_reset(ka_shared_t *x) { x->exchange->reset(); }

int ka_shared_begin(ka_shared_t *x, void *rate_table, const char **req, size_t *len, char *err,
                    size_t err_len) {
    try {
        x->exchange->begin(*static_cast<RateTable *>(rate_table));
        *req = x->exchange->request().data();
        *len = x->exchange->request().size();
        return 0;
    } catch (const std::exception &e) {
        say(err, err_len, "cannot make the exchange: ", e.what());
    } catch (...) {
        say(err, err_len, "cannot make the exchange");
    }
    x->exchange->reset();
    return -1;
}

int ka_shared_feed(ka_shared_t *x, const char *data, size_t len, char *err, size_t err_len) {
    try {
        std::string why;
        switch (x->exchange->feed(data, len, why)) {
        case SharedExchange::Feed::kMore:
            return 0;
        case SharedExchange::Feed::kDone:
            return 1;
        case SharedExchange::Feed::kError:
            break;
        }
        say(err, err_len, why);
    } catch (const std::exception &e) {
        say(err, err_len, "cannot read Redis's answer: ", e.what());
    } catch (...) {
        say(err, err_len, "cannot read Redis's answer");
    }
    x->exchange->reset();
    return -1;
}

int ka_shared_finish(ka_shared_t *x, void *rate_table, uint64_t now_ns, const ka_lock_t *lock,
                     ka_shared_result_t *out, char *err, size_t err_len) {
    try {
        ExchangeResult r;
        std::string why;
        bool ok = x->exchange->finish(*static_cast<RateTable *>(rate_table), now_ns,
                                      keyauth::lock_of(lock), r, why);
        out->published = r.published;
        out->folded = r.folded;
        out->unplaced = r.unplaced;
        out->entries = r.entries;
        out->bad_entries = r.bad_entries;
        out->capped = r.capped;
        out->more = r.more;
        out->resynced = r.resynced;
        if (ok) {
            if (r.resynced) say(err, err_len, r.resync_detail);
            return 0;
        }
        say(err, err_len, why);
    } catch (const std::exception &e) {
        say(err, err_len, "cannot fold Redis's answer: ", e.what());
    } catch (...) {
        say(err, err_len, "cannot fold Redis's answer");
    }
    x->exchange->reset();
    return -1;
}

}  // extern "C"
