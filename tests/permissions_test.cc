// Writers refuse a store other users can write (issue 13): the directory
// (sticky or not) and data.mdb / lock.mdb; group write stays allowed.
#include "permissions.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

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

const Finding *failure_about(const std::vector<Finding> &findings, const std::string &text) {
    for (const auto &f : findings)
        if (f.level == Finding::Level::kFail && f.message.find(text) != std::string::npos) return &f;
    return nullptr;
}

}  // namespace

TEST(StorePermissions, ANewStoreIsPrivateToItsGroup) {
    TempDir dir;
    std::string db = dir.sub("db");
    EXPECT_EQ(refusal(db), "");
    EXPECT_EQ(mode_of(db), 02770u);
    EXPECT_EQ(mode_of(db + "/data.mdb"), 0660u);
    EXPECT_EQ(mode_of(db + "/lock.mdb"), 0660u);
    EXPECT_TRUE(writable_by_others(db).empty());
    EXPECT_EQ(refusal(db), "") << "and it opens again";
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
