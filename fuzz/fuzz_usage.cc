// Usage as etcd (anyone who can write under the prefix) or a usage env of
// another build may hold it: usage keys and usage records, bucket keys and
// bucket records, through the
// parsers keyauthd's UsageSource uses. Never a crash; a key that parses is
// exactly the key etcd_usage_key makes for it, and a record that decodes
// encodes back to the same fields and bytes (the reserved ones aside).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "usage_bucket.h"
#include "usage_keyspace.h"
#include "usage_record.h"

using namespace keyauth;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::string_view in(reinterpret_cast<const char *>(data), size);
    Id account;
    account.fill(0x5a);
    const std::string within = etcd_usage_account_prefix("/keyauth/1", account);
    for (const std::string &k : {within + std::string(in), std::string(in)}) {
        Id key;
        if (!parse_etcd_usage_key(within, k, key)) continue;
        // the edge id is the last 24 hex digits, whatever they are
        unsigned char edge_id[KA_USAGE_EDGE_ID_LEN];
        const std::string_view edge_hex = std::string_view(k).substr(k.size() - 2 * KA_USAGE_EDGE_ID_LEN);
        for (size_t i = 0; i < KA_USAGE_EDGE_ID_LEN; i++) {
            auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
            edge_id[i] = static_cast<unsigned char>(nibble(edge_hex[2 * i]) << 4 | nibble(edge_hex[2 * i + 1]));
        }
        if (etcd_usage_key("/keyauth/1", account, key, edge_id) != k) __builtin_trap();
    }
    UsageTotals t;
    if (decode_usage_record(in, t)) {
        unsigned char rec[KA_USAGE_RECORD_SIZE];
        encode_usage_record(t, rec);
        // reserved bytes are not read: compare what is
        UsageTotals back;
        if (!decode_usage_record({reinterpret_cast<char *>(rec), sizeof(rec)}, back) || back != t) __builtin_trap();
        if (std::memcmp(rec + 8, in.data() + 8, KA_USAGE_RECORD_SIZE - 8) != 0) __builtin_trap();
    }
    // hour and day buckets: the LMDB key and the record
    BucketCounts c;
    if (decode_bucket(in, c)) {
        unsigned char rec[KA_USAGE_BUCKET_SIZE];
        encode_bucket(c, rec);
        if (std::memcmp(rec + 8, in.data() + 8, KA_USAGE_BUCKET_SIZE - 8) != 0) __builtin_trap();
    }
    uint32_t period = 0;
    unsigned char acc[KA_ID_LEN], key[KA_ID_LEN];
    if (decode_bucket_key(in, period, acc, key)) {
        unsigned char back[KA_USAGE_BUCKET_KEY_LEN];
        encode_bucket_key(period, acc, key, back);
        if (std::memcmp(back, in.data(), sizeof(back)) != 0) __builtin_trap();
    }
    return 0;
}
