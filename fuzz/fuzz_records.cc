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
        AccountRecord a{account.status, account.entitlement_rpm, account.created_ms,
                        std::string(account.name)};
        if (encode_account_record(a) != in) __builtin_trap();
    }
    PlanRecordView plan;
    if (decode_plan_record(data, size, plan) == DecodeStatus::kOk) {
        plan.feature_list();
    }
    FxRecord fx;
    decode_fx_record(data, size, fx);
    Id id{};
    decode_token_record(data, size, id);
    return 0;
}
