// keyauthctl's text output: stored strings cannot drive the operator's
// terminal, and the audit trail names the operator who really ran it.
#include <gtest/gtest.h>

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "command_support.h"
#include "terminal_text.h"

namespace keyauthctl {
namespace {

TEST(TerminalSafe, PlainTextAndUnicodeStayAsTheyAre) {
    EXPECT_EQ(terminal_safe(""), "");
    EXPECT_EQ(terminal_safe("billing key #2 (prod)"), "billing key #2 (prod)");
    EXPECT_EQ(terminal_safe("caf\xc3\xa9 \xe2\x82\xb9 \xf0\x9f\x94\x91 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d"),
              "caf\xc3\xa9 \xe2\x82\xb9 \xf0\x9f\x94\x91 \xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d")
        << "accents, symbols, emoji and right-to-left letters are text, not controls";
    EXPECT_EQ(terminal_safe("a\\u001b"), "a\\u001b") << "a backslash is not escaped";
}

TEST(TerminalSafe, C0AndDelAreEscaped) {
    EXPECT_EQ(terminal_safe("\x1b[31mred\x1b[0m"), "\\u001b[31mred\\u001b[0m");
    EXPECT_EQ(terminal_safe(std::string("a\0b", 3)), "a\\u0000b");
    EXPECT_EQ(terminal_safe("line\nfake line\r\t\x07\x7f"), "line\\u000afake line\\u000d\\u0009\\u0007\\u007f");
}

TEST(TerminalSafe, C1AndBidiControlsAreEscaped) {
    EXPECT_EQ(terminal_safe("\xc2\x80x\xc2\x9b" "31m\xc2\x9fy\xc2\xa0"), "\\u0080x\\u009b31m\\u009fy\xc2\xa0")
        << "C1 is U+0080..U+009F; U+00A0 is a printable space";
    EXPECT_EQ(terminal_safe("admin\xe2\x80\xae" "cod.exe"), "admin\\u202ecod.exe");
    for (const char *c : {"\xe2\x80\xaa", "\xe2\x80\xab", "\xe2\x80\xac", "\xe2\x80\xad", "\xe2\x81\xa6",
                          "\xe2\x81\xa7", "\xe2\x81\xa8", "\xe2\x81\xa9", "\xe2\x80\x8e", "\xe2\x80\x8f",
                          "\xd8\x9c"}) {
        std::string out = terminal_safe(c);
        EXPECT_EQ(out.substr(0, 2), "\\u") << "bidi control escaped: " << out;
        EXPECT_EQ(out.size(), 6u) << out;
    }
    EXPECT_EQ(terminal_safe("\xe2\x80\x8d\xe2\x80\xa9"), "\xe2\x80\x8d\xe2\x80\xa9")
        << "neighbours of the bidi controls (ZWJ, U+2029) stay";
}

TEST(TerminalSafe, BytesThatAreNotUtf8AreEscapedOneByOne) {
    EXPECT_EQ(terminal_safe("\x9b" "31m"), "\\x9b31m") << "a raw 8-bit CSI";
    EXPECT_EQ(terminal_safe("\xc0\x9b"), "\\xc0\\x9b") << "an overlong ESC-like sequence";
    EXPECT_EQ(terminal_safe("\xe2\x80"), "\\xe2\\x80") << "cut short at the end";
    EXPECT_EQ(terminal_safe("\xed\xa0\x80"), "\\xed\\xa0\\x80") << "a surrogate";
    EXPECT_EQ(terminal_safe("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80") << "beyond U+10FFFF";
    EXPECT_EQ(terminal_safe("\xe2\x1b[0m"), "\\xe2\\u001b[0m") << "a broken sequence does not swallow an ESC";
}

// SUDO_USER and SUDO_UID set for one test, and put back after it
class OperatorActor : public ::testing::Test {
protected:
    void SetUp() override {
        for (const char *name : {"SUDO_USER", "SUDO_UID"}) {
            const char *v = getenv(name);
            saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
        }
    }
    void TearDown() override {
        for (const auto &[name, value] : saved_) {
            if (value) setenv(name.c_str(), value->c_str(), 1);
            else unsetenv(name.c_str());
        }
    }
    static std::string real_login() {
        const passwd *pw = getpwuid(getuid());
        return pw ? pw->pw_name : std::to_string(getuid());
    }

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(OperatorActor, SudoUserAloneIsNotBelieved) {
    setenv("SUDO_USER", "ops-alice", 1);
    unsetenv("SUDO_UID");
    EXPECT_EQ(operator_actor().user, real_login());
}

TEST_F(OperatorActor, SudoUserUnderSudoAsRoot) {
    setenv("SUDO_USER", "ops-alice", 1);
    setenv("SUDO_UID", "1000", 1);
    EXPECT_EQ(operator_actor().user, getuid() == 0 ? "ops-alice" : real_login())
        << "believed only when the real uid is 0, as sudo makes it";
    setenv("SUDO_USER", "", 1);
    EXPECT_EQ(operator_actor().user, real_login()) << "an empty SUDO_USER names no one";
}

}  // namespace
}  // namespace keyauthctl
