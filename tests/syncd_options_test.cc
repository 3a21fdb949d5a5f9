// keyauth-syncd's command line for the snapshot options (issue 49): what
// each takes, the defaults, and every bad value a usage error (exit 2)
// that names the option.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "ip_allowlist.h"
#include "syncd_options.h"

using namespace keyauth::syncd;

namespace {

Options parse(std::initializer_list<const char *> args) {
    std::vector<std::string> words = {"keyauth-syncd"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char *> argv;
    for (auto &w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    return parse_options(static_cast<int>(words.size()), argv.data());
}

bool allows(const std::string &packed, const char *address) {
    unsigned char a[keyauth::kCidrEntryBytes];
    return keyauth::parse_cidr(address, a) == keyauth::CidrParse::kOk && keyauth::allowed_ips_fit(packed, a);
}

#define GOOD "--etcd", "http://127.0.0.1:2379", "--db", "/nonexistent/db"

}  // namespace

TEST(SyncdOptions, NoSnapshotsUnlessTold) {
    const Options o = parse({GOOD});
    EXPECT_TRUE(o.snapshot_listen.empty());
    EXPECT_TRUE(o.bootstrap_from.empty());
}

TEST(SyncdOptions, ALoopbackListenerServesLoopbackPeersByDefault) {
    const Options o = parse({GOOD, "--snapshot-listen", "127.0.0.1:9188"});
    EXPECT_EQ(o.snapshot_host, "127.0.0.1");
    EXPECT_EQ(o.snapshot_port, 9188);
    EXPECT_EQ(o.snapshot_timeout, std::chrono::seconds(10));
    EXPECT_TRUE(allows(o.snapshot_allow, "127.0.0.1"));
    EXPECT_TRUE(allows(o.snapshot_allow, "::1"));
    EXPECT_FALSE(allows(o.snapshot_allow, "10.0.0.5"));
}

TEST(SyncdOptions, TheFleetsPeersAndTheBootstrapList) {
    const Options o = parse({GOOD, "--snapshot-listen", "10.0.0.11:9188", "--snapshot-allow", "10.0.0.0/24,fd00::/8",
                             "--snapshot-timeout", "30", "--bootstrap-from",
                             "http://10.0.0.12:9188/snapshot,https://10.0.0.13:9188/snapshot"});
    EXPECT_TRUE(allows(o.snapshot_allow, "10.0.0.200"));
    EXPECT_TRUE(allows(o.snapshot_allow, "fd00::1"));
    EXPECT_FALSE(allows(o.snapshot_allow, "127.0.0.1"));
    EXPECT_EQ(o.snapshot_timeout, std::chrono::seconds(30));
    EXPECT_EQ(o.bootstrap_from, (std::vector<std::string>{"http://10.0.0.12:9188/snapshot",
                                                         "https://10.0.0.13:9188/snapshot"}));
}

TEST(SyncdOptions, TheCopyCommandIsExactlyTwoWords) {
    std::string dir;
    std::vector<std::string> w = {"keyauth-syncd", "--snapshot-copy", "/var/lib/keyauth/db"};
    std::vector<char *> argv = {w[0].data(), w[1].data(), w[2].data(), nullptr};
    EXPECT_TRUE(snapshot_copy_mode(3, argv.data(), dir));
    EXPECT_EQ(dir, "/var/lib/keyauth/db");
    EXPECT_FALSE(snapshot_copy_mode(2, argv.data(), dir));
}

TEST(SyncdOptionsDeathTest, EveryBadSnapshotValueIsAUsageError) {
    const auto two = ::testing::ExitedWithCode(2);
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "10.0.0.11:9188"}), two,
                "not a loopback address: name the peers.*--snapshot-allow");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "localhost:9188"}), two, "--snapshot-listen needs IP:PORT");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1"}), two, "--snapshot-listen needs IP:PORT");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1:9188", "--snapshot-allow", "10.1.2.3/8"}), two,
                "--snapshot-allow: ");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1:9188", "--snapshot-allow", "10.0.0.0/8,"}), two,
                "--snapshot-allow: ");
    EXPECT_EXIT(parse({GOOD, "--snapshot-allow", "10.0.0.0/8"}), two, "--snapshot-allow needs --snapshot-listen");
    EXPECT_EXIT(parse({GOOD, "--snapshot-timeout", "5"}), two, "--snapshot-timeout needs --snapshot-listen");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1:9188", "--snapshot-timeout", "0"}), two,
                "--snapshot-timeout");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1:9188", "--snapshot-timeout", "601"}), two,
                "--snapshot-timeout");
    EXPECT_EXIT(parse({GOOD, "--bootstrap-from", "ftp://10.0.0.12/snapshot"}), two,
                "--bootstrap-from: \"ftp://10.0.0.12/snapshot\" is not an http:// or https:// URL");
    EXPECT_EXIT(parse({GOOD, "--bootstrap-from", "http://10.0.0.12:9188/snapshot,"}), two,
                "--bootstrap-from: \"\" is not an http");
    EXPECT_EXIT(parse({GOOD, "--bootstrap-from", "http://a,http://b,http://c,http://d,http://e,http://f,http://g,"
                                                 "http://h,http://i,http://j,http://k,http://l,http://m,http://n,"
                                                 "http://o,http://p,http://q"}),
                two, "at most 16 URLs");
    EXPECT_EXIT(parse({GOOD, "--snapshot-listen", "127.0.0.1:1", "--snapshot-listen", "127.0.0.1:2"}), two,
                "--snapshot-listen given twice");
    EXPECT_EXIT(parse({GOOD, "--snapshot-copy", "/var/lib/keyauth/db"}), two, "a command of its own");
}
