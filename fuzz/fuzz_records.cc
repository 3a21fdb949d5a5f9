// Every record decoder over arbitrary bytes (as if LMDB held garbage); what
// decodes must re-encode to the same bytes.
#include <string>

#include "keyauth_core.h"
#include "records.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    KeyRecordView key;
    if (decode_key_record(data, size, key) == DecodeStatus::kOk) {
        key.grants("ip:read");
        std::string again = encode_key_record(key.to_owned());
        KeyRecordView view;
        if (decode_key_record(again.data(), again.size(), view) != DecodeStatus::kOk ||
            view.quota != key.quota || view.quota_managed != key.quota_managed)
            __builtin_trap();
    }
    AccountRecordView account;
    if (decode_account_record(data, size, account) == DecodeStatus::kOk) {
        // re-encodes (layout 1 with its defaults) to a record that reads the same
        AccountRecord owned = account.to_owned();
        std::string again = encode_account_record(owned);
        AccountRecordView view;
        if (decode_account_record(again.data(), again.size(), view) != DecodeStatus::kOk) __builtin_trap();
        AccountRecord back = view.to_owned();
        if (back.name != owned.name || back.max_keys != owned.max_keys || back.live_keys != owned.live_keys ||
            back.allowed_scopes != owned.allowed_scopes || back.entitlement_rpm != owned.entitlement_rpm ||
            back.status != owned.status || back.created_ms != owned.created_ms ||
            back.plan_id != owned.plan_id || back.overrides != owned.overrides || back.quota != owned.quota)
            __builtin_trap();
    }
    PlanRecordView plan;
    if (decode_plan_record(data, size, plan) == DecodeStatus::kOk) {
        plan.feature_list();
        // what a writer may store re-encodes (layout 2) with the same entitlements
        if (!plan.name.empty() && plan.name.size() <= KA_NAME_MAX_LEN) {
            PlanRecord owned = plan.to_owned("p");
            std::string again = encode_plan_record(owned);
            PlanRecordView view;
            if (decode_plan_record(again.data(), again.size(), view) != DecodeStatus::kOk ||
                view.states != plan.states || view.rate_rpm != plan.rate_rpm ||
                view.max_keys != plan.max_keys || view.quota != plan.quota)
                __builtin_trap();
        }
    }
    // the cost an upstream reports (keyauth_cost_header): a bounded number or -1
    const int64_t cost = ka_quota_parse_cost(in.data(), in.size());
    if (cost < -1 || cost > KA_QUOTA_MAX_COST) __builtin_trap();
    FxRecord fx;
    decode_fx_record(data, size, fx);
    TokenRecord token;
    if (decode_token_record(data, size, token) == DecodeStatus::kOk) {
        TokenRecord back;
        std::string again = encode_token_record(token);
        if (decode_token_record(again.data(), again.size(), back) != DecodeStatus::kOk ||
            back.account_id != token.account_id || back.expires_ms != token.expires_ms)
            __builtin_trap();
    }
    return 0;
}
