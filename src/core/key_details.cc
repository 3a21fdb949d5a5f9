// What an accepted key's variables and the verify answer tell beyond the
// verdict: the key's name and meta, its account's meta and plan id. Read
// afresh, by id, only when something asks (a variable a directive uses, a
// verify answer), so the access phase, its slots and its caches carry none
// of it: a variable nobody uses costs the request path nothing.
#include <cstring>

#include "edge.h"
#include "edge_store.h"
#include "keyauth_core.h"
#include "records.h"

static_assert(KA_KEY_DETAILS_MAX == KA_NAME_MAX_LEN + KA_PLAN_ID_MAX_LEN + 2 * KA_META_MAX_BYTES,
              "the details buffer holds the longest of each");

namespace {

// Copies text into buf at *used; false when it does not fit.
bool put(std::string_view text, char *buf, size_t buf_len, size_t *used, ka_str_t *out) {
    if (text.size() > buf_len - *used) return false;
    if (!text.empty()) std::memcpy(buf + *used, text.data(), text.size());  // an empty view may be null
    *out = {buf + *used, text.size()};
    *used += text.size();
    return true;
}

}  // namespace

extern "C" int ka_edge_key_details(ka_edge_t *edge, const ka_auth_result_t *auth, char *buf, size_t buf_len,
                                   ka_key_details_t *out) {
    using namespace keyauth;
    *out = ka_key_details_t{};
    if (edge == nullptr || !edge->store || auth == nullptr || !auth->found || buf == nullptr) return 0;
    EdgeStore::Snapshot snap(*edge->store);
    if (snap.begin() != 0) return 0;
    std::string_view raw;
    KeyRecordView key;
    // an older schema has no table by id (MDB_INCOMPATIBLE): nothing to tell
    if (snap.key_record_by_id(auth->key_id_bin, raw) != 0 ||
        decode_key_record(raw.data(), raw.size(), key) != DecodeStatus::kOk ||
        std::memcmp(key.account_id, auth->account_id_bin, KA_ID_LEN) != 0) {
        return 0;
    }
    size_t used = 0;
    if (!put(key.name, buf, buf_len, &used, &out->key_name) || !put(key.meta, buf, buf_len, &used, &out->key_meta))
        return 0;
    // the check's snapshot still (no write since): its cached account
    std::string_view plan_id, meta;
    if (const AccountState *cached = edge->accounts.find(auth->account_id_bin, snap.generation())) {
        plan_id = cached->plan_id;
        meta = cached->meta;
    } else {
        AccountRecordView account;
        if (snap.get(edge->store->accounts(), auth->account_id_bin, KA_ID_LEN, raw) != 0 ||
            decode_account_record(raw.data(), raw.size(), account) != DecodeStatus::kOk) {
            return 0;
        }
        plan_id = account.plan_id;
        meta = account.meta;
    }
    if (!put(plan_id, buf, buf_len, &used, &out->plan_id) || !put(meta, buf, buf_len, &used, &out->account_meta))
        return 0;
    return 1;
}
