// Issue 47 item 1, on both backends: a deployment's own key prefix NAME.
// New keys (create, create many, roll) take the current NAME, read in the
// same write as the key (a NAME set meanwhile makes the write read again);
// the store keeps every earlier NAME, newest first; a change is in the
// operator's audit trail and setting the current NAME again writes nothing;
// a NAME outside the grammar is refused with nothing written. The scanner
// patterns built from the store's NAMEs match every key made under three
// NAMEs and no console or admin token.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "console_fixture.h"
#include "key_format.h"
#include "keyauth_schema.h"
#include "mutation.h"
#include "racing_backend.h"
#include "scanner_patterns.h"

using namespace keyauth;
using keyauth::testing::Backend;
using keyauth::testing::TempDir;

namespace {

using Names = std::vector<std::string>;

class KeyPrefixTest : public ::testing::TestWithParam<Backend> {
protected:
    TempDir dir;
    int64_t now_ms = 1796083200000;  // 2026-12-01T00:00:00Z
    Store store = make_store();
    Id acc = store.create_account("acme", 600).account.id;

    Store make_store() {
        Store s(keyauth::testing::backend_for(GetParam(), dir));
        s.set_clock([this] { return now_ms; });
        return s;
    }
    const Actor ops = Actor::operator_named("ops");

    CreatedKey key() { return store.create_key(acc, "k", {"ip:read"}, 60); }
    std::vector<AuditEvent> events() { return store.list_audit(std::nullopt, 1000, std::nullopt).events; }
    size_t prefix_events() {
        size_t n = 0;
        for (const AuditEvent &e : events()) n += e.action == "config.set_key_prefix";
        return n;
    }
};

bool starts_with(const std::string &s, const std::string &head) { return s.compare(0, head.size(), head) == 0; }

}  // namespace

TEST_P(KeyPrefixTest, UntilOneIsSetKeysAreKa) {
    EXPECT_EQ(store.key_prefixes(), Names{"ka"});
    const CreatedKey k = key();
    EXPECT_TRUE(starts_with(k.secret, "ka_")) << k.secret;
    EXPECT_TRUE(key_format_ok(k.secret));
}

TEST_P(KeyPrefixTest, NewKeysTakeTheCurrentPrefixAndEarlierOnesAreKept) {
    const CreatedKey old = key();
    EXPECT_EQ(store.set_key_prefix("acme", ops), (Names{"acme", "ka"}));
    EXPECT_EQ(store.key_prefixes(), (Names{"acme", "ka"}));
    const CreatedKey one = key();
    EXPECT_TRUE(starts_with(one.secret, "acme_")) << one.secret;
    EXPECT_TRUE(key_format_ok(one.secret));
    EXPECT_EQ(one.key.prefix, one.secret.substr(0, kDisplayPrefixLen));
    for (const CreatedKey &k : store.create_keys(acc, "many", {"ip:read"}, 60, 3))
        EXPECT_TRUE(starts_with(k.secret, "acme_")) << k.secret;
    // a roll of a key made under "ka": its successor is of today's NAME
    const RolledKey rolled = store.roll_key(std::nullopt, old.key.key_id, 0);
    EXPECT_TRUE(starts_with(rolled.successor.secret, "acme_")) << rolled.successor.secret;

    EXPECT_EQ(store.set_key_prefix("b2", ops), (Names{"b2", "acme", "ka"}));
    EXPECT_TRUE(starts_with(key().secret, "b2_"));
    // back to an earlier NAME: it moves to the front, once
    EXPECT_EQ(store.set_key_prefix("ka", ops), (Names{"ka", "b2", "acme"}));
    EXPECT_TRUE(starts_with(key().secret, "ka_"));
    EXPECT_EQ(store.key_prefixes(), (Names{"ka", "b2", "acme"}));
}

TEST_P(KeyPrefixTest, AChangeIsAuditedInTheOperatorsTrailAndTheSameOneWritesNothing) {
    store.set_key_prefix("acme", ops);
    const std::vector<AuditEvent> all = events();
    auto it = std::find_if(all.begin(), all.end(), [](const AuditEvent &a) { return a.action == "config.set_key_prefix"; });
    ASSERT_NE(it, all.end());
    const AuditEvent &e = *it;
    EXPECT_EQ(e.account, Id{}) << "the operator's own trail";
    EXPECT_EQ(e.actor.type, Actor::Type::kOperator);
    EXPECT_EQ(e.actor.user, "ops");
    EXPECT_EQ(e.target_type, "config");
    EXPECT_EQ(e.changes, (nlohmann::json{{"keyPrefix", {{"from", "ka"}, {"to", "acme"}}}})) << e.changes.dump();
    for (const AuditEvent &a : store.list_audit(acc, 100, std::nullopt).events)
        EXPECT_NE(a.action, "config.set_key_prefix") << "not in an account's trail";

    const size_t before = events().size();
    EXPECT_EQ(store.set_key_prefix("acme", ops), (Names{"acme", "ka"}));
    EXPECT_EQ(events().size(), before) << "setting the current NAME again is no change";
    now_ms += 1;  // one millisecond later: the trail's order is the events' order
    store.set_key_prefix("zeta", ops);
    EXPECT_EQ(prefix_events(), 2u);
    const std::vector<AuditEvent> trail = store.list_audit(Id{}, 100, std::nullopt).events;
    ASSERT_GE(trail.size(), 2u);
    EXPECT_EQ(trail[0].changes["keyPrefix"], (nlohmann::json{{"from", "acme"}, {"to", "zeta"}}));
    EXPECT_EQ(trail[1].changes["keyPrefix"], (nlohmann::json{{"from", "ka"}, {"to", "acme"}}));
}

TEST_P(KeyPrefixTest, ANameOutsideTheGrammarIsRefusedWithNothingWritten) {
    store.set_key_prefix("acme", ops);
    const size_t before = events().size();
    for (std::string bad : {"", "a", "abcdefghijk", "Acme", "ac_me", "ac-me", "kac", "kaa", "ac me", "\xc3\xa9t\xc3\xa9"}) {
        try {
            store.set_key_prefix(bad, ops);
            ADD_FAILURE() << "accepted \"" << bad << "\"";
        } catch (const StoreError &e) {
            EXPECT_EQ(e.kind(), StoreError::Kind::kInvalid) << bad;
            EXPECT_EQ(e.field(), "keyPrefix") << bad;
        }
    }
    EXPECT_EQ(store.key_prefixes(), (Names{"acme", "ka"}));
    EXPECT_EQ(events().size(), before);
}

// What a deployment registers with a secret scanner, checked against what
// it made: keys under three NAMEs (the prefix changed twice), console and
// admin tokens, each pattern matching its own secrets only.
TEST_P(KeyPrefixTest, TheScannerPatternsMatchEveryKeyMadeAndNoToken) {
    std::vector<std::string> keys, console, admin;
    for (const char *name : {"ka", "acme", "zz9"}) {
        if (std::string(name) != "ka") store.set_key_prefix(name, ops);
        for (int i = 0; i < 5; i++) keys.push_back(key().secret);
        for (const CreatedKey &k : store.create_keys(acc, "many", {"ip:read"}, 60, 5)) keys.push_back(k.secret);
        console.push_back(store.create_account(name, 10).console_token);
        console.push_back(store.rotate_console_token(acc, 0).console_token);
        admin.push_back(store.create_admin_token(name, kAllAdminScopes, std::nullopt).secret);
    }
    const ScannerPatterns p = scanner_patterns(store.key_prefixes());
    EXPECT_EQ(p.keys, "\\b(?:zz9|acme|ka)_[0-9A-Za-z]{38}\\b");
    EXPECT_EQ(p.admin_tokens, "\\bkaa_[0-9A-Za-z]{38}\\b");
    EXPECT_EQ(p.console_tokens, "\\bkac_[0-9A-Za-z]{38}\\b");
    const std::regex key_re(p.keys), admin_re(p.admin_tokens), console_re(p.console_tokens);
    // each alone, and as a scanner meets it: in a line of code
    auto found = [](const std::regex &re, const std::string &secret) {
        std::smatch m;
        const std::string line = "API_KEY = \"" + secret + "\"  # do not commit";
        return std::regex_match(secret, re) && std::regex_search(line, m, re) && m.str() == secret;
    };
    for (const std::string &k : keys) {
        EXPECT_TRUE(found(key_re, k)) << k;
        EXPECT_FALSE(std::regex_search(k, admin_re)) << k;
        EXPECT_FALSE(std::regex_search(k, console_re)) << k;
    }
    for (const std::string &t : console) {
        EXPECT_TRUE(found(console_re, t)) << t;
        EXPECT_FALSE(std::regex_search(t, key_re)) << t;
        EXPECT_FALSE(std::regex_search(t, admin_re)) << t;
    }
    for (const std::string &t : admin) {
        EXPECT_TRUE(found(admin_re, t)) << t;
        EXPECT_FALSE(std::regex_search(t, key_re)) << t;
        EXPECT_FALSE(std::regex_search(t, console_re)) << t;
    }
    // a key with one more or one fewer character, or glued to a word, is no match
    EXPECT_FALSE(std::regex_search(keys.back() + "x", key_re));
    EXPECT_FALSE(std::regex_search(keys.back().substr(0, keys.back().size() - 1), key_re));
    EXPECT_FALSE(std::regex_search("x" + keys.back(), key_re));
}

INSTANTIATE_TEST_SUITE_P(Backends, KeyPrefixTest, keyauth::testing::kBothBackends, keyauth::testing::backend_name);

TEST(ScannerPatterns, WithNoNameTheDefaultsAndEveryNameInOrder) {
    EXPECT_EQ(scanner_patterns({}).keys, "\\b(?:ka)_[0-9A-Za-z]{38}\\b");
    EXPECT_EQ(scanner_patterns({"b", "a"}).keys, "\\b(?:b|a)_[0-9A-Za-z]{38}\\b");
}

namespace keyauth::testing {

// A prefix set by another writer (etcd: another keyauthctl) between a key's
// reads and its write is seen: the write reads again and the key takes the
// new NAME, never the one it first read.
TEST(KeyPrefixGuard, APrefixSetBetweenAKeysReadsAndItsWriteIsSeen) {
    const std::string prefix = "/key-prefix-test/" + std::to_string(::getpid());
    Store other(etcd_backend_at(prefix));
    const Id acc = other.create_account("acme", 600).account.id;
    bool raced = false;
    Store racing(std::make_unique<RacingBackend>(etcd_backend_at(prefix), [&] {
        other.set_key_prefix("acme");
        raced = true;
    }));
    const CreatedKey k = racing.create_key(acc, "k", {"ip:read"}, 60);
    EXPECT_TRUE(raced);
    EXPECT_EQ(k.secret.substr(0, 5), "acme_") << k.secret;
}

// A record this build cannot read (damaged, or a newer layout) is refused,
// never taken for "ka".
TEST(KeyPrefixRecord, AnUnreadableRecordIsCorruption) {
    const std::string prefix = "/key-prefix-corrupt/" + std::to_string(::getpid());
    Store store(etcd_backend_at(prefix));
    const Id acc = store.create_account("acme", 600).account.id;
    for (std::string bad : {"", "acme", "{\"v\":2,\"prefixes\":[\"acme\"]}", "{\"v\":1,\"prefixes\":[]}",
                            "{\"v\":1,\"prefixes\":[\"Acme\"]}", "{\"v\":1,\"prefixes\":[\"a\",\"a\"]}",
                            "{\"v\":\"1\",\"prefixes\":[\"acme\"]}", "{\"v\":1,\"prefixes\":[\"acme\"],\"x\":1}"}) {
        auto backend = etcd_backend_at(prefix);
        auto w = backend->begin_write();
        Mutation m;
        m.put(Table::kMeta, KA_META_KEY_PREFIX, bad);
        ASSERT_TRUE(w->apply(m));
        try {
            store.key_prefixes();
            ADD_FAILURE() << "read " << bad;
        } catch (const StoreError &e) {
            EXPECT_EQ(e.kind(), StoreError::Kind::kCorrupt) << bad;
        }
        EXPECT_THROW(store.create_key(acc, "k", {"ip:read"}, 60), StoreError) << bad;
    }
}

}  // namespace keyauth::testing
