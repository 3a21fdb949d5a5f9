// keyauthctl: the operator's CLI over the same LMDB store as keyauthd.
//
//   keyauthctl --db PATH [--usage-db PATH] [--json] COMMAND ...
//   keyauthctl --etcd URL[,URL...] [--json] COMMAND ...
//
// Exit status: 0 done, 1 the store refused (not found, invalid input, I/O),
// 2 usage error (or a catalog file refused).
#include <cstdlib>
#include <iostream>
#include <string>

#include "command_line.h"
#include "command_support.h"
#include "commands.h"
#include "no_core_dumps.h"
#include "etcd_backend.h"
#include "store.h"
#include "terminal_text.h"
#include "usage_source.h"
#include "webhook_signing.h"

int main(int argc, char **argv) {
    using namespace keyauthctl;
    std::string dump_error;
    if (!keyauth::refuse_core_dumps(dump_error)) {
        std::cerr << "keyauthctl: cannot turn core dumps off: " << dump_error << "\n";
        return 1;
    }
    std::string db = getenv("KEYAUTH_DB") ? getenv("KEYAUTH_DB") : "";
    std::string etcd = getenv("KEYAUTH_ETCD") ? getenv("KEYAUTH_ETCD") : "";
    try {
        Args a = parse_command_line(argc, argv);
        if (auto given = a.opt("db")) db = *given, etcd.clear();
        if (auto given = a.opt("etcd")) etcd = *given, db.clear();
        const std::string &group = a.words[0];
        if (!etcd.empty() && !db.empty())
            throw UsageError("$KEYAUTH_DB and $KEYAUTH_ETCD are both set: give --db or --etcd");
        if (!etcd.empty()) {
            if (group == "doctor") throw UsageError("doctor checks an LMDB store: give --db PATH");
            if (a.opt("usage-db"))
                throw UsageError("--usage-db is for a single host (--db); with --etcd usage is read from etcd");
            keyauth::EtcdBackendOptions eo;
            eo.endpoints = etcd;
            eo.prefix = a.opt("etcd-prefix").value_or(std::string(keyauth::kDefaultEtcdPrefix));
            eo.ca_file = a.opt("etcd-cacert").value_or("");
            eo.cert_file = a.opt("etcd-cert").value_or("");
            eo.key_file = a.opt("etcd-key").value_or("");
            std::string error;
            auto backend = keyauth::EtcdBackend::make(eo, error);
            if (!backend) throw UsageError("--etcd: " + error);
            keyauth::Store store(std::move(backend));
            // the many-edge source of quota use (quota_usage.h): every edge's, in etcd
            keyauth::etcd::ClientOptions quota_etcd;
            if (!keyauth::etcd::parse_endpoints(etcd, quota_etcd.endpoints, error)) {
                throw UsageError("--etcd: " + error);
            }
            quota_etcd.ca_file = eo.ca_file;
            quota_etcd.cert_file = eo.cert_file;
            quota_etcd.key_file = eo.key_file;
            set_quota_usage(keyauth::make_quota_usage_source("", quota_etcd, eo.prefix));
            set_usage_source(keyauth::make_usage_source("", quota_etcd, eo.prefix));
            set_webhook_key_file(a.opt("webhook-key-file").value_or(""), false);
            if (group == "init") return run_init_etcd(store, etcd, a);
            return run(store, a);
        }
        if (db.empty()) throw UsageError("no --db PATH or --etcd URL (or $KEYAUTH_DB, $KEYAUTH_ETCD)");
        if (group == "doctor") return run_doctor(db, a);
        size_t map_size = 0;
        if (auto mib = a.opt("map-size")) {
            uint32_t n = parse_u32(*mib, "--map-size");
            if (n < 1 || n > (1u << 20)) throw UsageError("--map-size takes MiB, from 1 to 1048576");
            map_size = size_t{n} << 20;
        }
        keyauth::Store store(db, map_size);
        // where the edge's workers put usage (nginx's keyauth_usage_db)
        const std::string usage_dir = a.opt("usage-db").value_or(keyauth::default_usage_dir(db));
        set_quota_usage(keyauth::make_quota_usage_source(usage_dir, {}));
        set_usage_source(keyauth::make_usage_source(usage_dir, {}, ""));
        if (auto f = a.opt("webhook-key-file")) set_webhook_key_file(*f, false);
        else set_webhook_key_file(keyauth::default_webhook_key_file(db), true);
        if (group == "init") return run_init(db, a);
        return run(store, a);
    } catch (const UsageError &e) {
        std::cerr << "keyauthctl: " << terminal_safe(e.what()) << "\n\n" << kUsage;
        return 2;
    } catch (const InputError &e) {
        std::cerr << "keyauthctl: " << terminal_safe(e.what()) << "\n";
        return 2;
    } catch (const keyauth::StoreError &e) {
        // the code (KEY_REVOKED, ...) is what a script tells the refusals apart by
        std::cerr << "keyauthctl: " << terminal_safe(e.what()) << (e.code().empty() ? "" : " (" + e.code() + ")")
                  << "\n";
        return 1;
    } catch (const std::exception &e) {  // I/O: the store refused
        std::cerr << "keyauthctl: " << terminal_safe(e.what()) << "\n";
        return 1;
    }
}
