// Every record decoder over arbitrary bytes (as if LMDB held garbage); what
// decodes must re-encode to the same bytes.
#include <string>

#include "records.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    KeyRecordView key;
    if (decode_key_record(data, size, key) == DecodeStatus::kOk) {
        key.grants("ip:read");
        std::string again = encode_key_record(key.to_owned());
        KeyRecordView view;
        if (decode_key_record(again.data(), again.size(), view) != DecodeStatus::kOk) __builtin_trap();
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
            back.status != owned.status || back.created_ms != owned.created_ms)
            __builtin_trap();
    }
    PlanRecordView plan;
    if (decode_plan_record(data, size, plan) == DecodeStatus::kOk) {
        plan.feature_list();
    }
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
