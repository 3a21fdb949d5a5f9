#include "quota_exchange.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "etcd_codec.h"
#include "quota_batch.h"
#include "quota_keyspace.h"
#include "quota_period.h"
#include "syncd_log.h"
#include "usage_publisher.h"

namespace keyauth::syncd {
namespace {

// etcd refuses more operations per txn (--max-txn-ops).
constexpr size_t kOpsPerTxn = 128;
constexpr int64_t kPageSize = 10000;

uint64_t saturating_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

std::string etcd_error(const char *what, const etcd::Status &s) {
    return std::string(what) + " (" + etcd::errc_name(s.code) + "): " + s.message;
}

}  // namespace

std::unique_ptr<QuotaExchange> QuotaExchange::make(QuotaExchangeOptions options, Metrics &metrics,
                                                   std::string &error) {
    auto client = etcd::Client::make(options.etcd, error);
    if (!client) return nullptr;
    return std::unique_ptr<QuotaExchange>(new QuotaExchange(std::move(options), metrics, std::move(client)));
}

QuotaExchange::QuotaExchange(QuotaExchangeOptions options, Metrics &metrics, std::unique_ptr<etcd::Client> client)
    : options_(std::move(options)), metrics_(metrics), client_(std::move(client)) {}

bool QuotaExchange::exchange_once(int64_t now_ms) {
    std::string error;
    bool ok = false;
    try {
        ok = round(now_ms, error);
    } catch (const std::exception &e) {  // bad_alloc: the next round may do better
        error = e.what();
    }
    if (!ok) return failed(error);
    if (failing_) log_event("quota exchange recovered");
    failing_ = false;
    metrics_.set_quota_exchanged(now_ms);
    return true;
}

// Counted every round, logged once when the exchange starts failing (an
// unreachable etcd would otherwise log every second).
bool QuotaExchange::failed(const std::string &error) {
    metrics_.add_quota_exchange_error();
    if (!failing_) log_event("quota exchange failed", {{"error", error}});
    failing_ = true;
    return false;
}

bool QuotaExchange::round(int64_t now_ms, std::string &error) {
    LedgerView view;
    if (!attach(view, error)) return false;
    if (!view.ledger) return true;  // the workers have not made it yet
    const bool have_edge_id = view.have_edge_id;
    const unsigned char *edge_id = view.edge_id;

    // 1. every edge's use, by period class (an earlier build's key, named
    // by the subject alone, counts where its edge has no key of the class)
    const std::string within = etcd_quota_prefix(options_.prefix);
    etcd::RangeRequest r;
    r.key = within;
    r.range_end = etcd::prefix_range_end(within);
    struct Mine {
        QuotaUse use;
        std::string etcd_key;
        bool classed = false;
    };
    std::map<std::string, Mine> mine;                                  // what etcd holds of this edge
    std::vector<std::string> unclassed;                                // this edge's keys of an earlier build
    std::map<std::pair<std::string, std::string>, Mine> heard;         // (class key, edge): the other edges'
    etcd::Status s = client_->range_all(r, kPageSize, [&](const etcd::RangeResponse &page) {
        for (const etcd::KeyValue &kv : page.kvs) {
            QuotaKeyName name;
            QuotaUse use;
            if (!parse_etcd_quota_key(within, kv.key, name) || !decode_quota_use(kv.value, use)) continue;
            const std::string k = subject_key(name.subject, name.id.data(), use.tag);
            const bool classed = name.cls != static_cast<uint8_t>(name.subject);
            Mine m{use, kv.key, classed};
            if (have_edge_id && std::memcmp(name.edge_id, edge_id, KA_USAGE_EDGE_ID_LEN) == 0) {
                if (!classed) unclassed.push_back(kv.key);
                auto [it, made] = mine.emplace(k, m);
                if (!made && classed) it->second = m;
            } else if (quota_tag_current(use.tag, now_ms) && use.used > 0) {
                auto [it, made] = heard.emplace(
                    std::make_pair(k, std::string(reinterpret_cast<const char *>(name.edge_id),
                                                  KA_USAGE_EDGE_ID_LEN)),
                    m);
                if (!made && classed) it->second = m;
            }
        }
        return true;
    });
    if (!s.ok()) {
        error = etcd_error("reading the quota use", s);
        return false;
    }
    std::map<std::string, std::pair<uint16_t, uint64_t>> others;  // the other edges' sums
    for (const auto &[ke, m] : heard) {
        auto &sum = others[ke.first];
        sum.first = m.use.tag;
        sum.second = saturating_add(sum.second, m.use.used);
    }

    // 2. the others' use, at this edge (with what Redis told, if it is on)
    {
        std::lock_guard<std::mutex> lock(others_mu_);
        etcd_others_ = std::move(others);
        if (!apply_others(now_ms)) {
            error = "the quota ledger has no room for another subject";
            return false;
        }
    }
    if (!have_edge_id) return true;

    // 3. this edge's own use, where etcd does not hold it yet (under its
    // class key: an earlier build's key of this edge goes, step 4)
    std::vector<std::pair<std::string, QuotaUse>> puts;
    std::map<std::string, bool> live;  // subjects whose key is put or current
    view.ledger->for_each([&](const QuotaLedger::Entry &e) {
        if (!quota_tag_current(e.tag, now_ms)) return;
        const std::string k = subject_key(e.subject, e.id, e.tag);
        const QuotaUse use{e.tag, e.used};
        live[k] = true;
        auto it = mine.find(k);
        if (it == mine.end() ? use.used > 0 : !it->second.classed || it->second.use != use) {
            puts.emplace_back(k, use);
        }
    });
    for (size_t i = 0; i < puts.size(); i += kOpsPerTxn) {
        etcd::TxnRequest txn;
        const size_t end = std::min(puts.size(), i + kOpsPerTxn);
        for (size_t j = i; j < end; j++) {
            const std::string &k = puts[j].first;
            txn.success.emplace_back(etcd::PutRequest{
                etcd_quota_key(options_.prefix, class_of(k), id_of(k), edge_id), encode_quota_use(puts[j].second)});
        }
        etcd::TxnResponse answer;
        s = client_->txn(txn, answer);
        if (!s.ok()) {  // what was not put differs from etcd still: the next round puts it
            error = etcd_error("publishing the quota use", s);
            return false;
        }
        metrics_.add_quota_published(end - i);
    }

    // 4. this edge's keys of periods that are over, and of an earlier build
    etcd::TxnRequest prune;
    for (const std::string &key : unclassed) {
        if (prune.success.size() == kOpsPerTxn) break;  // the rest next round
        prune.success.emplace_back(etcd::DeleteRangeRequest{key, ""});
    }
    for (const auto &[k, m] : mine) {
        if (prune.success.size() == kOpsPerTxn) break;
        if (!m.classed || quota_tag_current(m.use.tag, now_ms) || live.count(k) != 0) continue;
        prune.success.emplace_back(etcd::DeleteRangeRequest{m.etcd_key, ""});
    }
    if (!prune.success.empty()) {
        etcd::TxnResponse answer;
        s = client_->txn(prune, answer);
        if (!s.ok()) {
            error = etcd_error("deleting past quota use", s);
            return false;
        }
    }
    return true;
}

// The workers' ledger: opened once they have made it, again if it was made
// anew (an operator removed it); and the edge id, once nginx has made the
// usage env. No ledger yet is no error (view.ledger stays null).
bool QuotaExchange::attach(LedgerView &view, std::string &error) {
    std::lock_guard<std::mutex> lock(others_mu_);
    const std::string path = options_.usage_db + "/" + KA_QUOTA_LEDGER_FILE;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
        ledger_.reset();
        return true;
    }
    if (ledger_ && (st.st_ino != ledger_file_.first || st.st_dev != ledger_file_.second)) ledger_.reset();
    if (!ledger_) {
        std::string why;
        ledger_ = QuotaLedger::open_existing(path, why);
        if (!ledger_) return true;  // being made: the next round
        ledger_file_ = {st.st_ino, st.st_dev};
        folded_.clear();
    }
    if (!have_edge_id_) {
        have_edge_id_ = read_usage_edge_id(options_.usage_db, edge_id_, error);
        if (!error.empty()) return false;
    }
    view.ledger = ledger_;
    view.have_edge_id = have_edge_id_;
    std::memcpy(view.edge_id, edge_id_, KA_USAGE_EDGE_ID_LEN);
    return true;
}

bool QuotaExchange::set_redis_others(Sums sums, int64_t now_ms) {
    std::lock_guard<std::mutex> lock(others_mu_);
    redis_others_ = std::move(sums);
    return apply_others(now_ms);
}

// Under others_mu_: sets, for each subject, the greater of what etcd and
// Redis say the other edges used in its current period (each a lower bound
// of their use, so the greater never over-counts), and 0 where neither says
// anything any more. False when the ledger had no room for a subject.
bool QuotaExchange::apply_others(int64_t now_ms) {
    if (!ledger_) return true;
    Sums others;
    for (const Sums *from : {&etcd_others_, &redis_others_}) {
        for (const auto &[k, use] : *from) {
            if (!quota_tag_current(use.first, now_ms) || use.second == 0) continue;
            auto [it, made] = others.emplace(k, use);
            auto &have = it->second;
            if (made || use.first < have.first) continue;
            // one period class has one current period: a differing tag is a
            // clock's step across a boundary, and the greater tag's counts
            have.second = use.first > have.first ? use.second : std::max(have.second, use.second);
            have.first = use.first;
        }
    }
    std::vector<std::string> no_room;
    for (const auto &[k, use] : others) {
        auto was = folded_.find(k);
        if (was != folded_.end() && was->second == use) continue;  // as set already
        if (!ledger_->set_others(subject_of(k), id_of(k).data(), use.first, use.second, now_ms)) {
            no_room.push_back(k);
        }
    }
    for (const auto &[k, use] : folded_) {
        if (others.count(k) == 0) {  // the others' use went (a refund, a key deleted): back to 0
            ledger_->set_others(subject_of(k), id_of(k).data(), use.first, 0, now_ms);
        }
    }
    for (const std::string &k : no_room) others.erase(k);  // tried again next time
    folded_ = std::move(others);
    return no_room.empty();
}

void QuotaExchange::run() {
    loop_.run(options_.interval, [this](int64_t now_ms) { exchange_once(now_ms); });
}

void QuotaExchange::stop() {
    loop_.stop();
    client_->cancel();
}

}  // namespace keyauth::syncd
