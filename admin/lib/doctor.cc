#include "doctor.h"

#include <fcntl.h>
#include <grp.h>
#include <lmdb.h>
#include <lmdb++.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "edge_store.h"
#include "key_slots_writer.h"
#include "keyauth_schema.h"
#include "permissions.h"

namespace keyauth {
namespace {

using L = Finding::Level;

std::string octal(mode_t m) {
    char buf[8];
    snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
    return buf;
}

// Opens the files as `user` would (in a child that drops to that user).
Finding access_as(const std::string &path, const std::string &user) {
    struct passwd *pw = getpwnam(user.c_str());
    if (pw == nullptr) return {L::kFail, "no such user \"" + user + "\""};
    int pipefd[2];
    if (pipe(pipefd) != 0) return {L::kFail, std::string("pipe: ") + std::strerror(errno)};
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        std::string why;
        if (getuid() == 0 && (initgroups(pw->pw_name, pw->pw_gid) != 0 || setgid(pw->pw_gid) != 0 ||
                              setuid(pw->pw_uid) != 0)) {
            why = std::string("cannot switch to the user: ") + std::strerror(errno);
        } else if (open((path + "/lock.mdb").c_str(), O_RDWR) < 0) {
            why = "cannot write lock.mdb: " + std::string(std::strerror(errno));
        } else if (open((path + "/data.mdb").c_str(), O_RDONLY) < 0) {
            why = "cannot read data.mdb: " + std::string(std::strerror(errno));
        }
        // more than the workers need: a writer's access
        const bool writes =
            why.empty() && faccessat(AT_FDCWD, (path + "/data.mdb").c_str(), W_OK, AT_EACCESS) == 0;
        ssize_t n = write(pipefd[1], why.data(), why.size());
        (void)n;
        _exit(!why.empty() ? 1 : writes ? 2 : 0);
    }
    close(pipefd[1]);
    char buf[512];
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return {L::kOk, "user " + user + " can read data.mdb and write lock.mdb"};
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
        return {L::kWarn, "user " + user + " can read data.mdb and write lock.mdb, and can write data.mdb "
                          "too: as the nginx workers' user it could forge or revoke keys (the workers only "
                          "read it: data.mdb 0640, owned by the writer)"};
    }
    return {L::kFail, "user " + user + " " + std::string(buf, n > 0 ? static_cast<size_t>(n) : 0) +
                          " (chgrp -R a group of " + user +
                          " and keep the modes: directory 2750, data.mdb 0640, lock.mdb 0660)"};
}

// key_slots against key_records, slot by slot: what a writer killed in the
// middle of an update, or a damaged file, would show first.
void check_hot_table(MDB_env *env, std::vector<Finding> &out) {
    try {
        auto txn = lmdb::txn::begin(env, nullptr, MDB_RDONLY);
        auto records = lmdb::dbi::open(txn, KA_DB_KEY_RECORDS);
        auto slots = lmdb::dbi::open(txn, KA_DB_KEY_SLOTS);
        const std::vector<std::string> problems = check_key_slots(txn, records, slots);
        for (const std::string &p : problems) out.push_back({L::kFail, p});
        if (problems.empty()) {
            out.push_back({L::kOk, "key_slots agrees with key_records (" +
                                       std::to_string(records.size(txn)) + " keys)"});
        }
    } catch (const std::exception &e) {
        out.push_back({L::kFail, std::string("key_slots cannot be checked: ") + e.what()});
    }
}

}  // namespace

std::vector<Finding> diagnose(const std::string &path, const std::optional<std::string> &user) {
    std::vector<Finding> out;
    struct stat dir;
    if (stat(path.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
        out.push_back({L::kFail, path + " is not a directory (" + std::strerror(errno) +
                                     "); create it with keyauthctl init"});
        return out;
    }
    for (const char *file : {"data.mdb", "lock.mdb"}) {
        struct stat st;
        if (stat((path + "/" + file).c_str(), &st) != 0) {
            out.push_back({L::kFail, std::string(file) + " is missing; create the store with keyauthctl init"});
            return out;
        }
        const bool lock = std::strcmp(file, "lock.mdb") == 0;
        if ((st.st_mode & 0007) && !(st.st_mode & S_IWOTH)) {
            out.push_back({L::kWarn, std::string(file) + " is accessible to other users (mode " +
                                         octal(st.st_mode) + "); " + (lock ? "0660" : "0640") +
                                         " is enough"});
        }
        if (lock && !(st.st_mode & 0020)) {
            out.push_back({L::kWarn, "lock.mdb is not group-writable (mode " + octal(st.st_mode) +
                                         "): nginx workers of the group cannot take a reader slot"});
        }
        // the workers' group only reads (stores made before 2750/0640 had this)
        if (!lock && (st.st_mode & S_IWGRP) && !(st.st_mode & S_IWOTH)) {
            out.push_back({L::kWarn, path + "/data.mdb is group-writable (mode " + octal(st.st_mode) +
                                         "): the nginx workers' group could forge or revoke keys; "
                                         "only the owner writes it: chmod g-w " + path + "/data.mdb"});
        }
    }
    if ((dir.st_mode & 0007) && !(dir.st_mode & S_IWOTH)) {
        out.push_back({L::kWarn, path + " is accessible to other users (mode " + octal(dir.st_mode) +
                                     "); 2750 is enough"});
    }
    if ((dir.st_mode & S_IWGRP) && !(dir.st_mode & S_IWOTH)) {
        out.push_back({L::kWarn, path + " is group-writable (mode " + octal(dir.st_mode) +
                                     "): the nginx workers' group could replace data.mdb; "
                                     "only the owner writes it: chmod g-w " + path});
    }
    // what keyauthctl and keyauthd refuse to open
    for (const auto &w : writable_by_others(path)) {
        out.push_back({L::kFail, w.path + " is writable by other users (mode " + octal(w.mode) +
                                     "): they could forge or revoke keys, and keyauthctl and "
                                     "keyauthd refuse the store; fix: " +
                                     permission_fix(w)});
    }
    struct group *gr = getgrgid(dir.st_gid);
    out.push_back({L::kOk, "directory mode " + octal(dir.st_mode) + ", group " +
                               (gr ? std::string(gr->gr_name) : std::to_string(dir.st_gid))});

    std::string err;
    auto store = EdgeStore::open(path, err);
    if (!store) {
        out.push_back({L::kFail, "the edge cannot use it: " + err});
        return out;
    }
    out.push_back({L::kOk, "schema version and databases are as this build expects"});

    MDB_env *env = nullptr;
    if (mdb_env_create(&env) == 0 && mdb_env_set_maxdbs(env, KA_DB_COUNT) == 0 &&
        mdb_env_open(env, path.c_str(), MDB_RDONLY, 0) == 0) {
        if (store->schema_at_open() >= 3) {
            check_hot_table(env, out);
        } else {
            out.push_back({L::kWarn, "schema version " + std::to_string(store->schema_at_open()) +
                                         ": the first keyauthctl or keyauthd of this build to open it "
                                         "moves its keys to schema " + std::to_string(KA_SCHEMA_VERSION)});
        }
        MDB_envinfo info;
        MDB_stat st;
        if (mdb_env_info(env, &info) == 0 && mdb_env_stat(env, &st) == 0) {
            double used = double(info.me_last_pgno + 1) * st.ms_psize;
            double pct = 100.0 * used / double(info.me_mapsize);
            char buf[160];
            snprintf(buf, sizeof buf, "%.1f MiB used of a %.0f MiB map (%.1f%%)", used / 1048576.0,
                     double(info.me_mapsize) / 1048576.0, pct);
            out.push_back({pct > 80 ? L::kWarn : L::kOk,
                           std::string(buf) + (pct > 80 ? ": restart keyauthd with a larger --map-size" : "")});
        }
    }
    if (env) mdb_env_close(env);

    if (user) out.push_back(access_as(path, *user));
    return out;
}

}  // namespace keyauth
