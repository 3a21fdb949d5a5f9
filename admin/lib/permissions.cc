#include "permissions.h"

#include <sys/stat.h>

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
               " (created mode 2770)";
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

}  // namespace keyauth
