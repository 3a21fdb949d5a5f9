// The C API the nginx glue calls, against a real LMDB written by the store.
#include <gtest/gtest.h>
#include <lmdb.h>

#include <cstring>
#include <filesystem>
#include <new>
#include <sstream>
#include <unistd.h>
#include <vector>
#include <string>

#include "client_sockaddr.h"
#include "edge_store.h"
#include "key_format.h"
#include "keyauth_core.h"
#include "restrictions.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

constexpr int64_t kNow = 1'760'000'000'000;

class EdgeAuthTest : public ::testing::Test {
protected:
    TempDir dir;
    std::string path = dir.sub("db");
    Store store{path};
    Id acc = store.create_account("acme", 600).account.id;
    CreatedKey key = store.create_key(acc, "k", {"ip:read", "geo:*"}, 100);
    ka_edge_t *edge = nullptr;

    void SetUp() override {
        char err[256] = "";
        edge = ka_edge_open(path.c_str(), err, sizeof err);
        ASSERT_NE(edge, nullptr) << err;
    }
    void TearDown() override { ka_edge_close(edge); }

    std::vector<std::string> scopes_;  // outlives the result, which may point into it

    ka_auth_result_t auth(const std::string &header, std::vector<std::string> scopes = {"ip:read"},
                          bool has_header = true) {
        scopes_ = std::move(scopes);
        std::vector<ka_str_t> s;
        for (auto &x : scopes_) s.push_back({x.data(), x.size()});
        ka_auth_result_t r;
        ka_edge_authenticate(edge, has_header ? header.data() : nullptr, header.size(), nullptr, s.data(),
                             s.size(), kNow, &r);
        return r;
    }
    std::string bearer() { return "Bearer " + key.secret; }
};

}  // namespace

TEST_F(EdgeAuthTest, ValidKeyCarriesIdsAndRates) {
    auto r = auth(bearer());
    ASSERT_EQ(r.verdict, KA_AUTH_OK) << r.reason;
    EXPECT_EQ(r.log_level, KA_LOG_NONE);
    char text[KA_ID_TEXT_LEN];
    ka_format_key_id(r.key_id_bin, text);
    EXPECT_EQ(std::string(text, KA_ID_TEXT_LEN), id_to_string(kKeyIdPrefix, key.key.key_id));
    ka_format_account_id(r.account_id_bin, text);
    EXPECT_EQ(std::string(text, KA_ID_TEXT_LEN), id_to_string(kAccountIdPrefix, acc));
    EXPECT_EQ(std::string(r.prefix, r.prefix_len), key.secret.substr(0, 12));
    EXPECT_EQ(r.requested_rpm, 100u);
    EXPECT_EQ(r.entitlement_rpm, 600u);
}

TEST_F(EdgeAuthTest, MissingKey) {
    EXPECT_EQ(auth("", {"ip:read"}, false).verdict, KA_AUTH_KEY_REQUIRED);
    EXPECT_EQ(auth("Basic abc").verdict, KA_AUTH_KEY_REQUIRED);
    EXPECT_EQ(auth("Bearer ").verdict, KA_AUTH_KEY_REQUIRED);
}

TEST_F(EdgeAuthTest, InvalidKeysNeverLeakTheSecretIntoTheReason) {
    std::string typo = key.secret;
    typo[5] = typo[5] == 'A' ? 'B' : 'A';
    for (const std::string &h : {"Bearer " + typo, "Bearer " + key.secret + " x",
                                 "Bearer " + generate_secret(kKeyPrefix)}) {
        auto r = auth(h);
        EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID) << h;
        EXPECT_EQ(std::string(r.reason).find(key.secret.substr(12)), std::string::npos) << r.reason;
    }
}

// Issue 47 item 1: the edge does not know the deployment's key prefixes.
// Keys of every NAME it has had answer; a typo in a custom-prefix key is
// refused by its checksum before any lookup; a well-formed key of another
// NAME is looked up and not found; a console or admin token is no key.
TEST_F(EdgeAuthTest, KeysOfEveryPrefixTheDeploymentHadAreAccepted) {
    store.set_key_prefix("acme");
    const CreatedKey acme = store.create_key(acc, "acme", {"ip:read"}, 100);
    store.set_key_prefix("z9");
    const CreatedKey z9 = store.create_key(acc, "z9", {"ip:read"}, 100);
    ASSERT_EQ(z9.secret.substr(0, 3), "z9_");
    for (const CreatedKey *k : std::initializer_list<const CreatedKey *>{&key, &acme, &z9}) {
        auto r = auth("Bearer " + k->secret);
        EXPECT_EQ(r.verdict, KA_AUTH_OK) << k->secret << ": " << r.reason;
        EXPECT_EQ(std::string(r.prefix, r.prefix_len), k->secret.substr(0, 12));
    }
    std::string typo = acme.secret;
    typo[10] = typo[10] == 'A' ? 'B' : 'A';
    auto r = auth("Bearer " + typo);
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
    EXPECT_NE(std::string(r.reason).find("not a well-formed"), std::string::npos) << r.reason;
    r = auth("Bearer " + generate_secret("other_"));
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
    EXPECT_NE(std::string(r.reason).find("unknown"), std::string::npos) << r.reason;
    for (std::string_view token : {kConsoleTokenPrefix, kAdminTokenPrefix}) {
        r = auth("Bearer " + generate_secret(token));
        EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
        EXPECT_NE(std::string(r.reason).find("not a well-formed"), std::string::npos) << r.reason;
    }
}

TEST_F(EdgeAuthTest, RevokedKeyIsInvalidAtOnce) {
    ASSERT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
    store.revoke_key(acc, key.key.key_id);
    auto r = auth(bearer());
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
    EXPECT_NE(std::string(r.reason).find("revoked"), std::string::npos);
}

TEST_F(EdgeAuthTest, ScopesAreAllRequired) {
    EXPECT_EQ(auth(bearer(), {"ip:read", "geo:lookup"}).verdict, KA_AUTH_OK);
    auto r = auth(bearer(), {"ip:read", "asn:read"});
    EXPECT_EQ(r.verdict, KA_AUTH_SCOPE_MISSING);
    EXPECT_EQ(std::string(r.missing_scope.data, r.missing_scope.len), "asn:read");
    EXPECT_EQ(auth(bearer(), {}).verdict, KA_AUTH_OK);
}

// The account was read (and cached for the snapshot) by the first request.
TEST_F(EdgeAuthTest, EntitlementChangeIsSeenByTheNextRequest) {
    EXPECT_EQ(auth(bearer()).entitlement_rpm, 600u);
    store.set_entitlement(acc, 30);
    EXPECT_EQ(auth(bearer()).entitlement_rpm, 30u);
}

namespace {

// The read transaction ids of this process's LMDB reader slots ("-" for a
// slot that holds no snapshot), from the environment's lock file.
std::vector<std::string> reader_txnids(const std::string &path) {
    // mdb_stat, a process of its own: a second environment on the same files
    // in this process would drop this process's locks when it closes.
    std::string table;
    FILE *p = popen(("mdb_stat -r '" + path + "' 2>&1").c_str(), "r");
    EXPECT_NE(p, nullptr);
    if (p == nullptr) return {};
    char buf[256];
    while (fgets(buf, sizeof buf, p) != nullptr) table += buf;
    pclose(p);  // exits 1 after -r even when it printed the table
    EXPECT_NE(table.find("Reader Table Status"), std::string::npos) << table;
    std::vector<std::string> ids;
    std::istringstream in(table);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream row(line);
        std::string pid, thread, txnid;
        if (row >> pid >> thread >> txnid && pid == std::to_string(getpid())) {
            ids.push_back(txnid);
        }
    }
    return ids;
}

}  // namespace

// A worker keeps its snapshot from one request to the next while nothing
// was committed, renews it on the first request after a commit, and lets it
// go once it went unused for a whole idle period.
TEST_F(EdgeAuthTest, TheSnapshotIsKeptWhileNewestAndLetGoWhenIdle) {
    ASSERT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
    std::vector<std::string> held = reader_txnids(path);
    ASSERT_EQ(held.size(), 1u);
    ASSERT_NE(held[0], "-");
    ASSERT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
    EXPECT_EQ(reader_txnids(path), held);  // no commit since: the same snapshot

    store.set_entitlement(acc, 30);
    EXPECT_EQ(reader_txnids(path), held);  // not renewed before a request asks
    EXPECT_EQ(auth(bearer()).entitlement_rpm, 30u);
    std::vector<std::string> renewed = reader_txnids(path);
    ASSERT_EQ(renewed.size(), 1u);
    EXPECT_GT(std::stoull(renewed[0]), std::stoull(held[0]));

    ka_edge_idle(edge);  // used since the last tick: kept
    EXPECT_EQ(reader_txnids(path), renewed);
    ka_edge_idle(edge);  // a whole idle period: let go
    EXPECT_EQ(reader_txnids(path), std::vector<std::string>{"-"});
    EXPECT_EQ(auth(bearer()).verdict, KA_AUTH_OK);  // and taken again on demand
    EXPECT_EQ(reader_txnids(path), renewed);
}

TEST_F(EdgeAuthTest, SeesWritesAfterTheMapGrows) {
    // A second writer with a bigger map: the edge adopts the new size.
    {
        Store big(path, Store::kDefaultMapSize * 2);
        auto k2 = big.create_key(acc, "later", {"ip:read"}, 10);
        std::string h = "Bearer " + k2.secret;
        EXPECT_EQ(auth(h).verdict, KA_AUTH_OK);
    }
    EXPECT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
}

TEST_F(EdgeAuthTest, StaleOnceTheStoreIsMadeAnewAtItsPath) {
    char why[128] = "";
    EXPECT_EQ(ka_edge_stale(edge, why, sizeof why), 0);
    std::filesystem::remove_all(path);
    Store fresh(path);
    EXPECT_EQ(ka_edge_stale(edge, why, sizeof why), 1);
    EXPECT_STREQ(why, "data.mdb was replaced or removed");
}

TEST_F(EdgeAuthTest, StaleOnceLockFileIsDeleted) {
    // the writer would no longer see this reader, nor keep its pages
    char why[128] = "";
    std::filesystem::remove(path + "/lock.mdb");
    EXPECT_EQ(ka_edge_stale(edge, why, sizeof why), 1);
    EXPECT_STREQ(why, "lock.mdb was replaced or removed");
}

TEST_F(EdgeAuthTest, ScanSurvivesACallbackThatThrows) {
    std::string err;
    auto es = EdgeStore::open(path, err);
    ASSERT_TRUE(es) << err;
    {
        EdgeStore::Snapshot snap(*es);
        ASSERT_EQ(snap.begin(), 0);
        EXPECT_EQ(snap.scan(es->accounts(), [](std::string_view, std::string_view) -> bool {
                      throw std::bad_alloc();
                  }),
                  ENOMEM);
    }
    EdgeStore::Snapshot again(*es);
    ASSERT_EQ(again.begin(), 0);
    int seen = 0;
    EXPECT_EQ(again.scan(es->accounts(), [&](std::string_view, std::string_view) { return ++seen; }), 0);
    EXPECT_EQ(seen, 1);
}

TEST(EdgeOpen, MissingStoreFailsWithAReason) {
    TempDir dir;
    char err[256] = "";
    EXPECT_EQ(ka_edge_open(dir.sub("nope").c_str(), err, sizeof err), nullptr);
    EXPECT_NE(std::string(err).find("No such file"), std::string::npos) << err;
}

TEST(EdgeOpen, ForeignEnvironmentFailsWithAReason) {
    TempDir dir;
    MDB_env *env;
    ASSERT_EQ(mdb_env_create(&env), 0);
    ASSERT_EQ(mdb_env_open(env, dir.path().c_str(), 0, 0600), 0);
    mdb_env_close(env);
    char err[256] = "";
    EXPECT_EQ(ka_edge_open(dir.path().c_str(), err, sizeof err), nullptr);
    EXPECT_NE(std::string(err).find("not a keyauth environment"), std::string::npos) << err;
}

TEST(EdgeOpen, NoStoreStillAnswersMalformedAndMissingKeys) {
    ka_auth_result_t r;
    ka_edge_authenticate(nullptr, nullptr, 0, nullptr, nullptr, 0, kNow, &r);
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_REQUIRED);
    std::string h = "Bearer ka_nope";
    ka_edge_authenticate(nullptr, h.data(), h.size(), nullptr, nullptr, 0, kNow, &r);
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
    h = "Bearer " + generate_secret(kKeyPrefix);
    ka_edge_authenticate(nullptr, h.data(), h.size(), nullptr, nullptr, 0, kNow, &r);
    EXPECT_EQ(r.verdict, KA_AUTH_UNAVAILABLE);
    EXPECT_EQ(r.log_level, KA_LOG_ERROR);
}

TEST(RequiredScope, NoWildcards) {
    EXPECT_TRUE(ka_required_scope_ok("ip:read", 7));
    EXPECT_FALSE(ka_required_scope_ok("ip:*", 4));
    EXPECT_FALSE(ka_required_scope_ok("ip", 2));
}

namespace {

ka_auth_result_t auth_at(ka_edge_t *edge, const std::string &secret, int64_t now_ms) {
    const std::string header = "Bearer " + secret;
    ka_str_t scope{"ip:read", 7};
    ka_auth_result_t r;
    ka_edge_authenticate(edge, header.data(), header.size(), nullptr, &scope, 1, now_ms, &r);
    return r;
}

}  // namespace

TEST_F(EdgeAuthTest, AKeyIsRefusedFromTheExactMillisecondItExpires) {
    store.set_clock([] { return kNow - 60'000; });
    KeySpec spec{"expiring", {"ip:read"}, 100, kNow + 5'000, {}};
    CreatedKey k = store.create_key(acc, spec);
    EXPECT_EQ(auth_at(edge, k.secret, kNow + 4'999).verdict, KA_AUTH_OK);
    ka_auth_result_t r = auth_at(edge, k.secret, kNow + 5'000);
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_INVALID);
    EXPECT_NE(std::string(r.reason).find("expired"), std::string::npos) << r.reason;
}

TEST_F(EdgeAuthTest, ASuspendedAccountsKeysAre403UntilItIsResumed) {
    ASSERT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
    store.set_suspended(acc, true);
    ka_auth_result_t r = auth(bearer());
    EXPECT_EQ(r.verdict, KA_AUTH_ACCOUNT_SUSPENDED);
    EXPECT_NE(std::string(r.reason).find("suspended"), std::string::npos) << r.reason;
    store.set_suspended(acc, false);
    EXPECT_EQ(auth(bearer()).verdict, KA_AUTH_OK);
}

// Rolling never starts a fresh limit: every key of a chain spends the
// state of its first key.
TEST_F(EdgeAuthTest, ARolledKeySpendsItsPredecessorsRateState) {
    ka_auth_result_t first = auth(bearer());
    ASSERT_EQ(first.verdict, KA_AUTH_OK);
    EXPECT_EQ(0, std::memcmp(first.rate_id_bin, first.key_id_bin, KA_ID_LEN));
    RolledKey once = store.roll_key(acc, key.key.key_id, 3600);
    // the first key is in its hour of grace, its successor is current: one rate state
    for (const std::string &secret : {key.secret, once.successor.secret}) {
        ka_auth_result_t r = auth_at(edge, secret, wall_clock_ms());
        ASSERT_EQ(r.verdict, KA_AUTH_OK) << r.reason;
        EXPECT_EQ(0, std::memcmp(r.rate_id_bin, key.key.key_id.data(), KA_ID_LEN));
    }
    // and the first stops when its grace ends
    EXPECT_EQ(auth_at(edge, key.secret, wall_clock_ms() + 3'601'000).verdict, KA_AUTH_KEY_INVALID);
    RolledKey twice = store.roll_key(acc, once.successor.key.key_id, 0);
    ka_auth_result_t r = auth_at(edge, twice.successor.secret, wall_clock_ms());
    ASSERT_EQ(r.verdict, KA_AUTH_OK) << r.reason;
    EXPECT_EQ(0, std::memcmp(r.rate_id_bin, key.key.key_id.data(), KA_ID_LEN));
    // the middle key was rolled with no grace: revoked at once; and rolling
    // it ended the first one's grace (issue 44: two live secrets a chain)
    EXPECT_EQ(auth_at(edge, once.successor.secret, wall_clock_ms()).verdict, KA_AUTH_KEY_INVALID);
    EXPECT_EQ(auth_at(edge, key.secret, wall_clock_ms()).verdict, KA_AUTH_KEY_INVALID);
}

// allowedIps (issue 48): the key's list and its account's must both fit the
// client; an address the edge does not know fits none; a key without lists
// never reads the address. ka_edge_check_key (the verify API's) decides the same.
TEST_F(EdgeAuthTest, AllowedIpsOfTheKeyAndItsAccount) {
    sockaddr_storage in{};
    auto from = [&](const char *addr, const std::string &secret) {
        in = keyauth::testing::client_sockaddr(addr);
        ka_auth_result_t r;
        ka_edge_check_key(edge, secret.data(), secret.size(), reinterpret_cast<sockaddr *>(&in), nullptr, 0,
                          kNow, &r);
        return r.verdict;
    };
    EXPECT_EQ(from("192.0.2.1", key.secret), KA_AUTH_OK) << "no lists: anywhere";
    KeySpec spec{"office", {"ip:read"}, 100, std::nullopt, {}};
    spec.allowed_ips = allowed_ips_from_texts({"10.0.0.0/8"}, "allowedIps");
    CreatedKey office = store.create_key(acc, spec, Actor{});
    EXPECT_EQ(from("10.2.3.4", office.secret), KA_AUTH_OK);
    ka_auth_result_t r;
    r = auth("Bearer " + office.secret);
    EXPECT_EQ(r.verdict, KA_AUTH_IP_NOT_ALLOWED) << "no address: fits no list";
    EXPECT_NE(std::string(r.reason).find("not an IP address"), std::string::npos) << r.reason;
    EXPECT_EQ(from("192.0.2.1", office.secret), KA_AUTH_IP_NOT_ALLOWED);
    ka_edge_check_key(edge, office.secret.data(), office.secret.size(), reinterpret_cast<sockaddr *>(&in),
                      nullptr, 0, kNow, &r);
    EXPECT_EQ(r.log_level, KA_LOG_INFO);
    EXPECT_NE(std::string(r.reason).find("the key's"), std::string::npos) << r.reason;
    EXPECT_EQ(std::string(r.reason).find(office.secret.substr(12)), std::string::npos) << "no secret in the reason";

    AccountChanges narrow;
    narrow.allowed_ips = allowed_ips_from_texts({"10.1.0.0/16"}, "allowedIps");
    store.update_account(acc, narrow, Actor{});
    EXPECT_EQ(from("10.2.3.4", office.secret), KA_AUTH_IP_NOT_ALLOWED) << "outside the account's list";
    EXPECT_EQ(from("10.1.3.4", office.secret), KA_AUTH_OK);
    EXPECT_EQ(from("10.1.3.4", key.secret), KA_AUTH_OK) << "the account's list binds its keys without one";
    EXPECT_EQ(from("192.0.2.1", key.secret), KA_AUTH_IP_NOT_ALLOWED);
    ka_edge_check_key(edge, key.secret.data(), key.secret.size(), reinterpret_cast<sockaddr *>(&in), nullptr, 0,
                      kNow, &r);
    EXPECT_NE(std::string(r.reason).find("its account's"), std::string::npos) << r.reason;
    ka_edge_check_key(edge, nullptr, 0, nullptr, nullptr, 0, kNow, &r);
    EXPECT_EQ(r.verdict, KA_AUTH_KEY_REQUIRED);
}
