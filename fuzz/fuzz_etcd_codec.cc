// etcd's JSON gateway answers and watch-stream lines, as a broken member or
// anything between it and us could send them: every parser over the same
// bytes, never a crash, a hang or an exception. What parses must hold
// together: keys and values re-encode to base64 that decodes to the same
// bytes, a progress notification carries no events. The same bytes also go
// through base64 (an accepted text is exactly the encoding of what it decodes
// to) and the prefix range end (greater than the prefix, and no key with that
// prefix reaches it).
#include <string>
#include <string_view>

#include "etcd_codec.h"

using namespace keyauth::etcd;

namespace {

void check_kv(const KeyValue &kv) {
    std::string back;
    if (!base64_decode(base64_encode(kv.key), back) || back != kv.key) __builtin_trap();
    if (!base64_decode(base64_encode(kv.value), back) || back != kv.value) __builtin_trap();
    // a request built from what was read is well-formed
    build_put_request({kv.key, kv.value});
}

void check_range(const RangeResponse &r) {
    for (const KeyValue &kv : r.kvs) check_kv(kv);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    std::string error;

    RangeResponse range;
    if (parse_range_response(in, range, error)) check_range(range);
    PutResponse put;
    parse_put_response(in, put, error);
    DeleteRangeResponse del;
    parse_delete_range_response(in, del, error);
    TxnResponse txn;
    if (parse_txn_response(in, txn, error)) {
        for (const ResponseOp &op : txn.responses) {
            if (auto *r = std::get_if<RangeResponse>(&op)) check_range(*r);
        }
    }
    StatusResponse status;
    parse_status_response(in, status, error);
    CompactionResponse compaction;
    parse_compaction_response(in, compaction, error);
    GatewayError gateway;
    if (parse_gateway_error(in, gateway, error)) {
        gateway.is_compacted();
        gateway.is_no_leader();
    }
    WatchLine line;
    if (parse_watch_line(in, line, error)) {
        if (!line.is_error) {
            if (line.result.is_progress_notify() && !line.result.events.empty()) __builtin_trap();
            for (const Event &e : line.result.events) check_kv(e.kv);
        } else {
            line.error.is_no_leader();
        }
    } else if (error.empty()) {
        __builtin_trap();  // a refusal always says why
    }

    std::string decoded;
    if (base64_decode(in, decoded) && base64_encode(decoded) != in) __builtin_trap();
    std::string back;
    if (!base64_decode(base64_encode(in), back) || back != in) __builtin_trap();

    std::string end = prefix_range_end(in);
    if (end != std::string(1, '\0')) {
        if (!(end > in)) __builtin_trap();
        // every key starting with the prefix sorts before the end
        if (end.size() <= in.size() && in.compare(0, end.size(), end) == 0) __builtin_trap();
        std::string longest = std::string(in) + std::string(8, '\xff');
        if (!(longest < end)) __builtin_trap();
    }
    return 0;
}
