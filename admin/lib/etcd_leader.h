// One holder at a time for a job of the fleet (issue #46: the keyauthd that
// sends webhooks), elected with etcd's own primitives: a lease, and a key
// created under it only if it does not exist (txn compare create_revision
// == 0). The key's value is the holder's identity; the key goes when the
// lease expires (its holder died or was cut off) or is revoked (resign()).
//
// Safety argument ("exactly one sends at a time"):
//   - etcd creates the key for one contender only (the txn's compare), and
//     keeps it while that contender's lease lives: nobody else can create it
//     before the lease has expired or been revoked.
//   - Every renewal (grant, keep-alive) is timed from just BEFORE its request
//     is sent, on this process's monotonic clock (steady_clock). etcd's
//     leader renews the lease for TTL from when it handles the request, which
//     is later, on its own monotonic clock. So the lease cannot expire before
//     sent + TTL (up to the clocks' rate difference: parts per million).
//   - still_leader() says yes only until sent + TTL - margin (margin TTL/5 by
//     default): a holder cut off from etcd stops claiming `margin` before its
//     lease can expire, hence before anyone else can acquire. It needs no
//     answer from etcd to turn false: it is read off the clock.
//   - A sender calls still_leader() before each delivery. A delivery started
//     just before the fence is still in flight after it; with the margin it
//     can overlap the next holder's first deliveries by at most the delivery
//     timeout - margin. That is the "one delivery in flight" a takeover may
//     repeat (receivers dedupe on webhook-id). A sender that wants no overlap
//     at all caps each delivery's timeout at remaining().
//   - Pauses the clock cannot see (the process stopped between the check and
//     the send) are not covered by any lease; term() is a fencing token for
//     that: the key's create_revision, larger for every new holder, which a
//     store write can compare against.
//   - Only the lease (or an operator deleting the key by hand) removes the
//     key; keep() reads the key after each renewal and gives up leadership
//     if it no longer holds this identity under this lease.
//
// Liveness: a holder that dies stops renewing; its lease expires at most TTL
// after its last renewal, etcd revokes it within ~0.5 s (its expiry check),
// and the next contender's campaign (LeaderLoop: every min(TTL/3, 1 s))
// takes it. So another holder within about TTL + 1.5 s of a death, at once
// after a resign(). An etcd leader election meanwhile extends every lease by
// about its election timeout (etcd 3.4 does not persist remaining TTLs).
//
// Thread-safety: try_acquire(), keep() and resign() from one thread at a
// time; still_leader(), remaining(), holder() and cancel() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcd_client.h"

namespace keyauth::etcd {

struct LeaderOptions {
    ClientOptions client;  // its request timeout is capped at ttl / 2
    std::string key;       // e.g. prefix + "leader/webhooks"
    std::string identity;  // make_holder_identity(): unique to this process
    std::chrono::seconds ttl{10};  // etcd raises anything under 2 s to 2 s
    // still_leader() turns false this long before the lease can expire;
    // 0: ttl / 5.
    std::chrono::milliseconds margin{0};
};

// "host:pid:16 hex digits": tells processes apart in logs and metrics, and
// the random part tells a restarted process with a reused pid from its
// predecessor.
std::string make_holder_identity();

class EtcdLeader {
public:
    using Clock = std::chrono::steady_clock;

    // nullptr with a reason when the options are unusable.
    static std::unique_ptr<EtcdLeader> make(LeaderOptions options, std::string &error);
    // Makes no call: a dropped leader's lease expires by itself (resign()
    // for a handover at once).
    ~EtcdLeader();
    EtcdLeader(const EtcdLeader &) = delete;
    EtcdLeader &operator=(const EtcdLeader &) = delete;

    // One campaign: keep() if this process holds the key; otherwise read the
    // key and, if it is absent, create it under a live lease of ours (a
    // lease granted for this, or the one a lost race left). True when this
    // process holds the key.
    bool try_acquire();
    // While holding: renew the lease and check that the key still holds this
    // identity under it (call every ttl / 3). False, and leadership dropped,
    // when the lease is gone, the key is not ours, or etcd has not answered
    // until the fence passed; true meanwhile (the fence is not extended
    // without an answer).
    bool keep();
    // Stops claiming at once, then revokes the lease, which deletes the key:
    // another contender takes over at its next campaign. If etcd cannot be
    // reached the lease expires by itself within the TTL.
    void resign();

    // Any thread: holding, and the fence (last renewal sent + TTL - margin)
    // not passed. Call before each delivery.
    bool still_leader() const;
    // Any thread: the time until the fence; zero when not leading.
    Clock::duration remaining() const;
    // Any thread: the identity the key held when last read ("" if none).
    std::string holder() const;
    // While leading: the key's create_revision, a fencing token that every
    // new holder gets larger; 0 otherwise.
    int64_t term() const { return term_.load(); }
    // The last failed call's status (kOk when the last call worked).
    Status last_status() const;

    const std::string &identity() const { return options_.identity; }
    const std::string &key() const { return options_.key; }
    std::chrono::seconds ttl() const { return options_.ttl; }
    std::chrono::milliseconds margin() const { return options_.margin; }
    // Any thread: the running call and every later one fail (shutdown).
    void cancel() { client_->cancel(); }

private:
    EtcdLeader(LeaderOptions options, std::unique_ptr<Client> client);
    bool note(const Status &s);  // records s; returns s.ok()
    // A live lease of ours, renewed now: reused if etcd still has it, else
    // a new one. Sets renewed_at_ and lease_ttl_.
    bool ensure_lease();
    bool key_is_ours(const KeyValue &kv) const;
    void lead(int64_t create_revision);
    void lose();
    void set_holder(std::string holder);

    LeaderOptions options_;
    std::unique_ptr<Client> client_;
    bool held_ = false;       // we created the key and have not seen it go
    int64_t lease_id_ = 0;    // 0: none
    Clock::time_point renewed_at_{};  // when the last renewal's request was sent
    std::chrono::seconds lease_ttl_{0};
    std::atomic<Clock::rep> fence_{0};  // Clock ticks; 0: not leading
    std::atomic<int64_t> term_{0};
    mutable std::mutex mutex_;  // holder_ and status_
    std::string holder_;
    Status status_;
};

// A thread that campaigns every min(TTL/3, 1 s) while not leading and keeps
// the lease alive every TTL/3 while leading. The sender asks still_leader()
// before each delivery; leading() and holder() are for metrics and logs.
class LeaderLoop {
public:
    // Called on the loop's thread when leading() changes.
    using OnChange = std::function<void(bool leading, const std::string &holder)>;

    explicit LeaderLoop(std::unique_ptr<EtcdLeader> leader, OnChange on_change = nullptr);
    ~LeaderLoop();  // stop(true)
    LeaderLoop(const LeaderLoop &) = delete;
    LeaderLoop &operator=(const LeaderLoop &) = delete;

    bool still_leader() const { return leader_->still_leader(); }
    EtcdLeader::Clock::duration remaining() const { return leader_->remaining(); }
    bool leading() const { return leading_.load(); }
    std::string holder() const { return leader_->holder(); }
    const EtcdLeader &leader() const { return *leader_; }
    // Campaigns and keeps made so far (metrics; each is 1 to 3 etcd calls).
    uint64_t rounds() const { return rounds_.load(); }

    // Ends the thread. resign: after the running call, revoke the lease (a
    // clean shutdown: another takes over at once); otherwise the running
    // call is cut short and the lease left to expire (as if killed).
    // Idempotent; the first call decides.
    void stop(bool resign = true);

private:
    void run();

    std::unique_ptr<EtcdLeader> leader_;
    OnChange on_change_;
    std::atomic<bool> leading_{false};
    std::atomic<uint64_t> rounds_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    bool resign_ = true;
    std::thread thread_;
};

}  // namespace keyauth::etcd
