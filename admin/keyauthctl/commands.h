// keyauthctl's commands over an open store, each printing text or JSON.
#pragma once

#include "command_line.h"
#include "store.h"
#include "usage_source.h"

namespace keyauthctl {

int run_account(keyauth::Store &store, const Args &a);
int run_key(keyauth::Store &store, const Args &a);
int run_plans(keyauth::Store &store, const Args &a);
int run_fx(keyauth::Store &store, const Args &a);
int run_audit(keyauth::Store &store, const Args &a);
int run_usage(keyauth::Store &store, const Args &a);
int run_admin_token(keyauth::Store &store, const Args &a);
int run_webhook(keyauth::Store &store, const Args &a);
int run_config(keyauth::Store &store, const Args &a);
// The deployment's webhook key file (webhook_signing.h) webhook create
// derives secrets from; made there if missing when make_if_missing (one
// host). Empty: none given (--etcd without --webhook-key-file).
void set_webhook_key_file(const std::string &path, bool make_if_missing);
// Where usage report reads the edges' buckets (main sets it; none: zeros).
void set_usage_source(std::unique_ptr<keyauth::UsageSource> source);
int run_init(const std::string &db, const Args &a);
// init on etcd: nothing to create; checks that the cluster answers.
int run_init_etcd(keyauth::Store &store, const std::string &endpoints, const Args &a);
// account, key, audit, usage, plans, fx, admin-token, webhook and config commands.
int run(keyauth::Store &store, const Args &a);
// Before anything opens (and so creates) the store; exit 1 on a failure.
int run_doctor(const std::string &db, const Args &a);

}  // namespace keyauthctl
