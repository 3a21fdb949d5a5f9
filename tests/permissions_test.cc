// Writers refuse a store other users can write (issue 13): the directory
// (sticky or not) and data.mdb / lock.mdb; group write stays allowed. A new
// store is 2750, data.mdb 0640, lock.mdb 0660, and a process that may not
// write it is refused before anything is written (issue 26).
#include "permissions.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>

#include "doctor.h"
#include "store.h"
#include "temp_dir.h"

using namespace keyauth;
using keyauth::testing::TempDir;

namespace {

// The message of the StorePermissionError that opening the store throws,
// or "" when it opens.
std::string refusal(const std::string &db) {
    try {
        Store store(db);
        return "";
    } catch (const StorePermissionError &e) {
        return e.what();
    }
}

bool exists(const std::string &path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

mode_t mode_of(const std::string &path) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
}

std::string contents(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The refusal of opening the store as a user who may not write it: nobody
// (the store given its group, as the nginx workers' group) when run as root,
// else this user with the write bits taken away.
std::string refusal_of_a_reader(const std::string &parent, const std::string &db) {
    if (::geteuid() != 0) {
        ::chmod(db.c_str(), 02550);
        ::chmod((db + "/data.mdb").c_str(), 0440);
        std::string why = refusal(db);
        ::chmod(db.c_str(), 02750);
        ::chmod((db + "/data.mdb").c_str(), 0640);
        return why;
    }
    const gid_t nogroup = 65534;
    EXPECT_EQ(::chmod(parent.c_str(), 0755), 0);
    EXPECT_EQ(::chown(db.c_str(), 0, nogroup), 0);
    EXPECT_EQ(::chown((db + "/data.mdb").c_str(), 0, nogroup), 0);
    if (::chown((db + "/lock.mdb").c_str(), 0, nogroup) != 0) {
        EXPECT_EQ(errno, ENOENT) << "a lock file that is there must be the group's too";
    }
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        const bool dropped = ::setgroups(0, nullptr) == 0 && ::setgid(nogroup) == 0 && ::setuid(65534) == 0;
        std::string why = "cannot drop to nobody";
        try {  // never back into gtest: the child only reports
            if (dropped) why = refusal(db);
        } catch (const std::exception &e) {
            why = std::string("another error: ") + e.what();
        }
        ssize_t n = ::write(fds[1], why.data(), why.size());
        _exit(n < 0);
    }
    ::close(fds[1]);
    std::string why;
    char buf[512];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) why.append(buf, static_cast<size_t>(n));
    ::close(fds[0]);
    ::waitpid(pid, nullptr, 0);
    return why;
}

const Finding *failure_about(const std::vector<Finding> &findings, const std::string &text) {
    for (const auto &f : findings)
        if (f.level == Finding::Level::kFail && f.message.find(text) != std::string::npos) return &f;
    return nullptr;
}

const Finding *warning_about(const std::vector<Finding> &findings, const std::string &text) {
    for (const auto &f : findings)
        if (f.level == Finding::Level::kWarn && f.message.find(text) != std::string::npos) return &f;
    return nullptr;
}

}  // namespace

TEST(StorePermissions, ANewStoreIsReadByItsGroupAndWrittenByItsOwner) {
    TempDir dir;
    std::string db = dir.sub("db");
    const mode_t umask_was = ::umask(077);  // the modes hold whatever the umask
    EXPECT_EQ(refusal(db), "");
    ::umask(umask_was);
    // the workers' group reads data.mdb and takes reader slots in lock.mdb
    EXPECT_EQ(mode_of(db), 02750u);
    EXPECT_EQ(mode_of(db + "/data.mdb"), 0640u);
    EXPECT_EQ(mode_of(db + "/lock.mdb"), 0660u);
    EXPECT_TRUE(writable_by_others(db).empty());
    EXPECT_EQ(refusal(db), "") << "and it opens again";
    for (const auto &f : diagnose(db, std::nullopt)) EXPECT_EQ(f.level, Finding::Level::kOk) << f.message;

    // lock.mdb removed while nothing has the store open: the next writer makes
    // it again with the group's write bit, which LMDB alone would not give it
    ASSERT_EQ(::unlink((db + "/lock.mdb").c_str()), 0);
    EXPECT_EQ(refusal(db), "");
    EXPECT_EQ(mode_of(db + "/lock.mdb"), 0660u);
}

TEST(StorePermissions, AProcessThatMayNotWriteTheStoreIsRefusedBeforeAnythingIsWritten) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    ASSERT_EQ(::unlink((db + "/lock.mdb").c_str()), 0);  // so that making one would show
    const std::string before = contents(db + "/data.mdb");
    const std::string why = refusal_of_a_reader(dir.path(), db);
    EXPECT_NE(why.find("refusing to write the store at " + db + ": user "), std::string::npos) << why;
    EXPECT_NE(why.find(" may not write " + db + "/data.mdb ("), std::string::npos) << why;
    EXPECT_NE(why.find("only the store's owner writes it, its group only reads it: run this as "),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("(runuser -u "), std::string::npos) << why;
    EXPECT_EQ(contents(db + "/data.mdb"), before) << "data.mdb unchanged";
    EXPECT_FALSE(exists(db + "/lock.mdb")) << "not even lock.mdb was made";
    EXPECT_EQ(refusal(db), "") << "its owner still writes it";
}

TEST(StorePermissions, ANewStoreWhereTheProcessMayNotCreateFilesIsRefused) {
    if (::geteuid() == 0) GTEST_SKIP() << "root may create files anywhere";
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(::mkdir(db.c_str(), 0550), 0);
    std::string why = refusal(db);
    ::chmod(db.c_str(), 0750);
    EXPECT_NE(why.find(" may not create files in " + db + " ("), std::string::npos) << why;
    EXPECT_FALSE(exists(db + "/lock.mdb"));
}

TEST(StorePermissions, DoctorWarnsOfAGroupThatCanWriteTheStore) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    // the modes of a store made before issue 26: still opened, but a warning
    ASSERT_EQ(::chmod(db.c_str(), 02770), 0);
    ASSERT_EQ(::chmod((db + "/data.mdb").c_str(), 0660), 0);
    EXPECT_EQ(refusal(db), "");
    auto findings = diagnose(db, std::nullopt);
    const Finding *f = warning_about(findings, db + "/data.mdb is group-writable (mode 0660)");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("could forge or revoke keys"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("chmod g-w " + db + "/data.mdb"), std::string::npos) << f->message;
    f = warning_about(findings, db + " is group-writable (mode 2770)");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("chmod g-w " + db), std::string::npos) << f->message;
    for (const auto &w : findings) EXPECT_NE(w.level, Finding::Level::kFail) << w.message;
}

TEST(StorePermissions, DoctorWarnsOfAWorkerUserThatCanWriteTheStore) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    // this user owns the store: as the workers' user it could write data.mdb
    struct passwd *me = ::getpwuid(::geteuid());
    ASSERT_NE(me, nullptr);
    const std::string user = me->pw_name;
    auto findings = diagnose(db, user);
    const Finding *f =
        warning_about(findings, "user " + user + " can read data.mdb and write lock.mdb, and can write data.mdb too");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("could forge or revoke keys"), std::string::npos) << f->message;
}

TEST(StorePermissions, GroupWriteAndOthersReadingAreAllowed) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    // the nginx workers' group writes lock.mdb; others reading is doctor's
    // warning, not a refusal
    ASSERT_EQ(::chmod(db.c_str(), 0775), 0);
    ASSERT_EQ(::chmod((db + "/data.mdb").c_str(), 0664), 0);
    ASSERT_EQ(::chmod((db + "/lock.mdb").c_str(), 0664), 0);
    EXPECT_TRUE(writable_by_others(db).empty());
    EXPECT_EQ(refusal(db), "");
}

TEST(StorePermissions, AWorldWritableDirectoryIsRefusedBeforeAnythingIsCreated) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(::mkdir(db.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(db.c_str(), 0777), 0);
    std::string why = refusal(db);
    EXPECT_NE(why.find("other users can write " + db + " (mode 0777)"), std::string::npos) << why;
    EXPECT_NE(why.find("fix: chmod o-w " + db), std::string::npos) << why;
    EXPECT_FALSE(exists(db + "/data.mdb")) << "nothing was created";
    EXPECT_FALSE(exists(db + "/lock.mdb"));
    ASSERT_EQ(::chmod(db.c_str(), 0770), 0);
    EXPECT_EQ(refusal(db), "") << "the fix works";
}

TEST(StorePermissions, ASharedStickyDirectoryIsRefusedToo) {
    TempDir dir;
    std::string db = dir.sub("shared");
    ASSERT_EQ(::mkdir(db.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(db.c_str(), 01777), 0);
    std::string why = refusal(db);
    EXPECT_NE(why.find("(mode 1777)"), std::string::npos) << why;
    // chmod o-w of a shared directory such as /tmp would be the wrong advice
    EXPECT_NE(why.find("keep the store in a directory of its own, e.g. --db " + db + "/keyauth"),
              std::string::npos)
        << why;
    EXPECT_EQ(why.find("chmod"), std::string::npos) << why;
    EXPECT_EQ(refusal(db + "/keyauth"), "") << "the advice works";
}

TEST(StorePermissions, WorldWritableFilesAreRefusedAllInOneMessage) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    ASSERT_EQ(::chmod((db + "/data.mdb").c_str(), 0666), 0);
    std::string why = refusal(db);
    EXPECT_NE(why.find(db + "/data.mdb (mode 0666)"), std::string::npos) << why;
    EXPECT_NE(why.find("fix: chmod o-w " + db + "/data.mdb"), std::string::npos) << why;
    ASSERT_EQ(::chmod((db + "/lock.mdb").c_str(), 0662), 0);
    ASSERT_EQ(::chmod(db.c_str(), 02777), 0);
    why = refusal(db);
    EXPECT_NE(why.find(db + " (mode 2777), " + db + "/data.mdb (mode 0666), " + db +
                       "/lock.mdb (mode 0662)"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("fix: chmod o-w " + db + " " + db + "/data.mdb " + db + "/lock.mdb"),
              std::string::npos)
        << why;
}

TEST(StorePermissions, ASymlinkedFileIsJudgedByWhatItPointsTo) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    std::string elsewhere = dir.sub("data.mdb");
    ASSERT_EQ(::rename((db + "/data.mdb").c_str(), elsewhere.c_str()), 0);
    ASSERT_EQ(::symlink(elsewhere.c_str(), (db + "/data.mdb").c_str()), 0);
    EXPECT_EQ(refusal(db), "");
    ASSERT_EQ(::chmod(elsewhere.c_str(), 0666), 0);
    EXPECT_NE(refusal(db).find(db + "/data.mdb (mode 0666)"), std::string::npos);
}

TEST(StorePermissions, TheFixQuotesAPathForTheShell) {
    TempDir dir;
    std::string db = dir.sub("my store's db");
    ASSERT_EQ(::mkdir(db.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(db.c_str(), 0777), 0);
    auto found = writable_by_others(db);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_TRUE(found[0].directory);
    EXPECT_EQ(permission_fix(found[0]), "chmod o-w '" + dir.path() + "/my store'\\''s db'");
}

TEST(StorePermissions, DoctorReportsEachAsAFailureWithItsFix) {
    TempDir dir;
    std::string db = dir.sub("db");
    ASSERT_EQ(refusal(db), "");
    ASSERT_EQ(::chmod((db + "/lock.mdb").c_str(), 0666), 0);
    ASSERT_EQ(::chmod(db.c_str(), 0777), 0);
    auto findings = diagnose(db, std::nullopt);
    const Finding *f = failure_about(findings, db + "/lock.mdb is writable by other users (mode 0666)");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("fix: chmod o-w " + db + "/lock.mdb"), std::string::npos) << f->message;
    f = failure_about(findings, db + " is writable by other users (mode 0777)");
    ASSERT_NE(f, nullptr);
    EXPECT_NE(f->message.find("fix: chmod o-w " + db), std::string::npos) << f->message;
    // no second, milder finding about the same modes
    for (const auto &w : findings) {
        EXPECT_EQ(w.message.find("is accessible to other users"), std::string::npos) << w.message;
    }
}
