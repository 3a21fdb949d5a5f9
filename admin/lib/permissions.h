// Who may write a store. Anyone who can write the store directory, data.mdb
// or lock.mdb can forge keys, revoke them or corrupt the store, so every
// writer (keyauthctl, keyauthd) refuses a store that other users can write,
// and keyauthctl doctor reports it as a failure.
//
// The group is the nginx workers': LMDB readers open data.mdb read-only and
// take their slot in lock.mdb, so a store is made 2750, data.mdb 0640 and
// lock.mdb 0660, and only its owner writes it (require_writable_store). A
// group-writable data.mdb or directory of an older store is doctor's warning,
// not a refusal. A world-writable directory is refused even with the sticky
// bit (as /tmp has): others could still create a data.mdb or lock.mdb that
// is missing, or the files of a store made later in it.
#pragma once

#include <sys/types.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace keyauth {

struct WritableByOthers {
    std::string path;  // the directory, or PATH/data.mdb, PATH/lock.mdb
    mode_t mode;       // its mode bits (07777)
    bool directory;
};

// What of the store at dir other users can write (o+w), following symlinks
// as LMDB does; what does not exist yet, or cannot be examined, is left out
// (opening it fails on its own).
std::vector<WritableByOthers> writable_by_others(const std::string &dir);

// How to fix one finding, as a command: "chmod o-w PATH", or for a shared
// sticky directory such as /tmp, to use a directory of its own.
std::string permission_fix(const WritableByOthers &w);

class StorePermissionError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws StorePermissionError, with every finding and how to fix it, when
// other users can write the store at dir. keyauth::Store's constructor calls
// it before opening anything, so keyauthctl and keyauthd need no call of
// their own.
void require_private_store(const std::string &dir);

// Throws StorePermissionError, saying who may write the store and how to run
// as that user, when this process cannot write data.mdb (or, for a new store,
// create files in dir): a process of the workers' group must not get in
// through lock.mdb, which it can write, and fail only halfway. Called before
// LMDB opens anything, so nothing is written.
void require_writable_store(const std::string &dir);

}  // namespace keyauth
