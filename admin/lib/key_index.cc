#include "key_index.h"

#include "records.h"
#include "store_error.h"

namespace keyauth {

KeyIndex key_index_of(std::string_view record) {
    KeyRecordView v;
    DecodeStatus st = decode_key_record(record.data(), record.size(), v);
    if (st != DecodeStatus::kOk)
        throw StoreError(StoreError::Kind::kInvalid, "",
                         st == DecodeStatus::kUnknownVersion
                             ? "key record of layout version " + std::to_string(v.version) +
                                   " is not known here"
                             : std::string("key record is corrupt"));
    KeyIndex ix;
    ix.by_id.assign(reinterpret_cast<const char *>(v.key_id), KA_ID_LEN);
    ix.by_account.assign(reinterpret_cast<const char *>(v.account_id), KA_ID_LEN);
    ix.by_account += ix.by_id;
    return ix;
}

}  // namespace keyauth
