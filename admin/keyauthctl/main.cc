// keyauthctl: the operator's CLI over the same LMDB store as keyauthd.
//
//   keyauthctl --db PATH [--json] COMMAND ...
//
// Exit status: 0 done, 1 the store refused (not found, invalid input, I/O),
// 2 usage error.
#include <cstdlib>
#include <iostream>
#include <string>

#include "command_line.h"
#include "commands.h"
#include "no_core_dumps.h"
#include "store.h"

int main(int argc, char **argv) {
    using namespace keyauthctl;
    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthctl: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }
    std::string db = getenv("KEYAUTH_DB") ? getenv("KEYAUTH_DB") : "";
    try {
        Args a = parse_command_line(argc, argv);
        if (auto given = a.opt("db")) db = *given;
        if (db.empty()) throw UsageError("no --db PATH (or $KEYAUTH_DB)");
        const std::string &group = a.words[0];
        if (group == "doctor") return run_doctor(db, a);
        size_t map_size = 0;
        if (auto mib = a.opt("map-size")) {
            uint32_t n = parse_u32(*mib, "--map-size");
            if (n < 1 || n > (1u << 20)) throw UsageError("--map-size takes MiB, from 1 to 1048576");
            map_size = size_t{n} << 20;
        }
        keyauth::Store store(db, map_size);
        if (group == "init") return run_init(db, a);
        if (group == "account") return run_account(store, a);
        if (group == "plans") return run_plans(store, a);
        if (group == "fx") return run_fx(store, a);
        return run_key(store, a);
    } catch (const UsageError &e) {
        std::cerr << "keyauthctl: " << e.what() << "\n\n" << kUsage;
        return 2;
    } catch (const std::exception &e) {  // StoreError and I/O: the store refused
        std::cerr << "keyauthctl: " << e.what() << "\n";
        return 1;
    }
}
