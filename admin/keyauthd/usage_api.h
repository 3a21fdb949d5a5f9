// GET /v1/usage?granularity=hour|day&from=&to=[&keyId=]: the calling
// account's usage over time, all its keys or one, zero-filled, UTC. The
// admin API's GET /v1/admin/usage is the same answer for any account
// (?accountId=), or for all of them.
#pragma once

#include "http_exchange.h"
#include "ids.h"
#include "store.h"
#include "usage_source.h"

namespace keyauth {

// usage: where the edges' buckets are read (none: zeros). Throws StoreError
// (the console API's handler answers it) when the store or the usage cannot
// be read.
HttpResponse usage_answer(Store &store, UsageSource *usage, const Id &account, const HttpRequest &req);
// The admin form: ?accountId= picks the account (404 ACCOUNT_NOT_FOUND when
// there is none), ?keyId= alone picks its owner; neither: every account.
HttpResponse admin_usage_answer(Store &store, UsageSource *usage, const HttpRequest &req);

}  // namespace keyauth
