// `keyauthctl plans import FILE`: the whole JSON file, then the catalog rules.
#include <string_view>

#include "catalog_json.h"
#include "store.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    try {
        auto plans = keyauth::parse_catalog(
            std::string_view(reinterpret_cast<const char *>(data), size));
        keyauth::validate_catalog(plans);
        for (const auto &p : plans) keyauth::encode_plan_record(p);
    } catch (const keyauth::StoreError &) {
        // the documented refusal
    }
    return 0;
}
