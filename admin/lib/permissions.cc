#include "permissions.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace keyauth {
namespace {

std::string octal(mode_t m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
    return buf;
}

// A path as a shell word, quoted only when it needs to be.
std::string shell_word(const std::string &s) {
    bool plain = !s.empty();
    for (char c : s) {
        plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == ':' ||
                          c == '@' || c == ',' || c == '=');
    }
    if (plain) return s;
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

bool shared_directory(const WritableByOthers &w) { return w.directory && (w.mode & S_ISVTX); }

std::string user_name(uid_t uid) {
    struct passwd pw, *found = nullptr;
    char buf[1024];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) return pw.pw_name;
    return "uid " + std::to_string(uid);
}

std::string group_name(gid_t gid) {
    struct group gr, *found = nullptr;
    char buf[1024];
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &found) == 0 && found != nullptr) return gr.gr_name;
    return std::to_string(gid);
}

}  // namespace

std::vector<WritableByOthers> writable_by_others(const std::string &dir) {
    std::vector<WritableByOthers> out;
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH))
        out.push_back({dir, st.st_mode & 07777, S_ISDIR(st.st_mode)});
    for (const char *file : {"data.mdb", "lock.mdb"}) {
        std::string path = dir + "/" + file;
        if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IWOTH))
            out.push_back({path, st.st_mode & 07777, S_ISDIR(st.st_mode)});
    }
    return out;
}

std::string permission_fix(const WritableByOthers &w) {
    if (shared_directory(w))
        return "keep the store in a directory of its own, e.g. --db " + shell_word(w.path + "/keyauth") +
               " (created mode 2750)";
    return "chmod o-w " + shell_word(w.path);
}

void require_private_store(const std::string &dir) {
    auto found = writable_by_others(dir);
    if (found.empty()) return;
    std::string what, fix, chmod;
    for (const auto &w : found) {
        what += (what.empty() ? "" : ", ") + w.path + " (mode " + octal(w.mode) + ")";
        if (shared_directory(w)) fix = permission_fix(w);
        else chmod += " " + shell_word(w.path);
    }
    if (fix.empty()) fix = "chmod o-w" + chmod;
    throw StorePermissionError("refusing the store at " + dir + ": other users can write " + what +
                               ", and so forge or revoke keys; fix: " + fix);
}

void require_writable_store(const std::string &dir) {
    struct stat st;
    const bool fresh = ::stat((dir + "/data.mdb").c_str(), &st) != 0;
    const std::string path = fresh ? dir : dir + "/data.mdb";  // a new store: LMDB creates files in dir
    if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) == 0) return;
    const int why = errno;
    if (::stat(path.c_str(), &st) != 0) return;  // opening it says what is wrong
    std::string msg = "refusing to write the store at " + dir + ": ";
    if (why == EROFS) throw StorePermissionError(msg + path + " is on a read-only file system");
    const std::string owner = user_name(st.st_uid);
    throw StorePermissionError(msg + "user " + user_name(::geteuid()) + " may not " +
                               (fresh ? "create files in " : "write ") + path + " (" + owner + ":" +
                               group_name(st.st_gid) + ", mode " + octal(st.st_mode) +
                               "); only the store's owner writes it, its group only reads it: run this as " +
                               owner + " (runuser -u " + owner + " -- ...)");
}

}  // namespace keyauth
