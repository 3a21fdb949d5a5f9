// The encoding rules of etcd 3.4's v3 JSON gateway (grpc-gateway over the
// KV, Watch, Lease and Maintenance services), in one place, so that keyauthd,
// keyauthctl and keyauth-syncd never spell a field by hand:
//   - keys and values are base64 (standard alphabet, padded) both ways;
//   - int64 fields travel as JSON strings ("42"); an integer is accepted too,
//     as the proto3 JSON mapping allows;
//   - answers omit every field equal to zero, false or empty: absent reads as
//     0 / false / empty here;
//   - etcd silently ignores a request field it does not know, so a misspelt
//     name would change the meaning of a request without an error: requests
//     are only ever built by the functions below.
// The rules were checked against real etcd 3.4.23 members; the unit tests
// replay answers recorded from one (tests/fixtures/etcd/).
//
// A parser never throws: it returns false and says why in `error`, and the
// answer is then a bad answer (etcd::Errc::kBadAnswer). Every input is
// bounded (kMaxAnswerBytes, kMaxJsonDepth) before it is parsed. A builder
// throws nothing but std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace keyauth::etcd {

// An answer or one watch line longer than this is refused unparsed. etcd
// bounds a request at 1.5 MiB, but one catch-up watch line carries up to
// 1,000 revisions' events (~240 KB for 1,000 small keys; more with large
// values), and a range page holds `limit` keys.
inline constexpr std::size_t kMaxAnswerBytes = 64u << 20;
// etcd's answers nest 6 levels deep; anything much deeper is not etcd.
inline constexpr int kMaxJsonDepth = 16;

// ---- primitives ---------------------------------------------------------

std::string base64_encode(std::string_view bytes);
// Strict: only the standard alphabet, '=' padding to a multiple of 4, and
// unused low bits zero (the only form etcd writes), so that an accepted text
// is exactly base64_encode(out). False leaves `out` unspecified.
bool base64_decode(std::string_view text, std::string &out);

// The end of the range holding every key that starts with `prefix`: the
// prefix with trailing 0xff bytes dropped and its last byte + 1. A prefix of
// only 0xff bytes (or empty) has no such key; the answer is then "\0", which
// etcd reads as "up to the end of the keyspace".
std::string prefix_range_end(std::string_view prefix);

// ---- what answers share ----------------------------------------------

struct ResponseHeader {
    uint64_t cluster_id = 0;  // uint64 ids: they can exceed INT64_MAX
    uint64_t member_id = 0;
    int64_t revision = 0;     // the store's revision when the answer was made
    uint64_t raft_term = 0;
};

struct KeyValue {
    std::string key;
    std::string value;
    int64_t create_revision = 0;
    int64_t mod_revision = 0;
    int64_t version = 0;  // 0 only in a DELETE event's kv
    int64_t lease = 0;    // the lease the key is attached to; 0: none
};

// ---- requests (each builder returns the JSON body to POST) --------------

struct RangeRequest {  // POST /v3/kv/range
    std::string key;
    std::string range_end;  // empty: the one key; prefix_range_end(key): a prefix
    int64_t limit = 0;      // 0: no limit
    int64_t revision = 0;   // 0: the newest; otherwise read at that revision
    bool keys_only = false;
    bool count_only = false;
    bool serializable = false;  // answer from the member's own copy (may be stale)
};

struct PutRequest {  // POST /v3/kv/put
    std::string key;
    std::string value;
    // 0: none. Otherwise the key is deleted when that lease expires or is
    // revoked; a lease that no longer exists fails the put (or the whole txn)
    // with "requested lease not found".
    int64_t lease = 0;
};

struct DeleteRangeRequest {  // POST /v3/kv/deleterange
    std::string key;
    std::string range_end;
};

enum class CompareTarget { kCreate, kMod, kVersion, kValue };
enum class CompareResult { kEqual, kGreater, kLess, kNotEqual };

// One guard of a txn: `target` of `key` compared with `number` (CREATE, MOD,
// VERSION) or `value` (VALUE). A key that does not exist has create_revision,
// mod_revision and version 0.
struct Compare {
    std::string key;
    std::string range_end;  // set: every key of [key, range_end) is compared
    CompareTarget target = CompareTarget::kMod;
    CompareResult result = CompareResult::kEqual;
    int64_t number = 0;
    std::string value;

    // The guards the etcd backend uses: "the key does not exist" and "the key
    // was last written at revision r" (its mod_revision as read).
    static Compare absent(std::string key);
    static Compare mod_revision_is(std::string key, int64_t revision);
    // "the key holds exactly these bytes" (false for an absent key)
    static Compare value_is(std::string key, std::string value);
    // "no key of [key, range_end) was written after revision r" (deleted
    // keys are not seen: a table whose records are never deleted)
    static Compare none_written_after(std::string key, std::string range_end, int64_t revision);
};

using RequestOp = std::variant<RangeRequest, PutRequest, DeleteRangeRequest>;

// POST /v3/kv/txn. etcd refuses more than 128 operations per txn
// (--max-txn-ops) and requests over 1.5 MiB (--max-request-bytes).
struct TxnRequest {
    std::vector<Compare> compare;
    std::vector<RequestOp> success;
    std::vector<RequestOp> failure;
};

// POST /v3/watch: the first and only message of a watch stream.
struct WatchCreateRequest {
    std::string key;
    std::string range_end;
    int64_t start_revision = 0;  // 0: from now on
    bool progress_notify = true;  // idle streams get header-only results
};

std::string build_range_request(const RangeRequest &r);
std::string build_put_request(const PutRequest &r);
std::string build_delete_range_request(const DeleteRangeRequest &r);
std::string build_txn_request(const TxnRequest &r);
std::string build_watch_create_request(const WatchCreateRequest &r);
std::string build_compaction_request(int64_t revision, bool physical);
std::string build_status_request();

// ---- leases (the Lease service) -----------------------------------------

// POST /v3/lease/grant. etcd raises a TTL below its minimum (1.5 x the
// election timeout, rounded up: 2 s with the default settings) to that
// minimum; the answer says the TTL granted.
struct LeaseGrantRequest {
    int64_t ttl_seconds = 0;
    int64_t id = 0;  // 0: etcd picks one
};

std::string build_lease_grant_request(const LeaseGrantRequest &r);
// POST /v3/lease/keepalive: one request of the stream, which the gateway
// closes once it has answered it (tests/fixtures/etcd/lease_keepalive*.txt).
std::string build_lease_keepalive_request(int64_t id);
// POST /v3/lease/revoke: the lease and every key attached to it go at once.
std::string build_lease_revoke_request(int64_t id);

// ---- answers ----------------------------------------------------------

struct RangeResponse {
    ResponseHeader header;
    std::vector<KeyValue> kvs;
    bool more = false;   // another page follows (a limit was hit)
    int64_t count = 0;   // keys in the whole range, not only this page
};

struct PutResponse {
    ResponseHeader header;
};

struct DeleteRangeResponse {
    ResponseHeader header;
    int64_t deleted = 0;
};

using ResponseOp = std::variant<RangeResponse, PutResponse, DeleteRangeResponse>;

struct TxnResponse {
    ResponseHeader header;
    bool succeeded = false;  // the compares held: `success` ran, else `failure`
    std::vector<ResponseOp> responses;  // one per operation that ran, in order
};

struct StatusResponse {
    ResponseHeader header;
    std::string version;  // etcd's, e.g. "3.4.23"
    uint64_t leader = 0;  // member id of the leader as this member knows it
    int64_t db_size = 0;
};

struct CompactionResponse {
    ResponseHeader header;
};

struct LeaseGrantResponse {
    ResponseHeader header;
    int64_t id = 0;
    int64_t ttl_seconds = 0;  // what was granted
};

// One keep-alive answer. The lease is renewed for ttl_seconds from when its
// member's leader handled the request; ttl_seconds 0 says the lease does not
// exist (expired or revoked): etcd answers so rather than with an error.
struct LeaseKeepAliveResponse {
    ResponseHeader header;
    int64_t id = 0;
    int64_t ttl_seconds = 0;
};

struct LeaseRevokeResponse {
    ResponseHeader header;
};

bool parse_range_response(std::string_view text, RangeResponse &out, std::string &error);
bool parse_put_response(std::string_view text, PutResponse &out, std::string &error);
bool parse_delete_range_response(std::string_view text, DeleteRangeResponse &out,
                                 std::string &error);
bool parse_txn_response(std::string_view text, TxnResponse &out, std::string &error);
bool parse_status_response(std::string_view text, StatusResponse &out, std::string &error);
bool parse_compaction_response(std::string_view text, CompactionResponse &out,
                               std::string &error);
bool parse_lease_grant_response(std::string_view text, LeaseGrantResponse &out, std::string &error);
bool parse_lease_revoke_response(std::string_view text, LeaseRevokeResponse &out,
                                 std::string &error);

// ---- the watch stream -------------------------------------------------

enum class EventType { kPut, kDelete };

struct Event {
    EventType type = EventType::kPut;
    KeyValue kv;  // a DELETE's kv has the key and the deletion's mod_revision
};

// One `{"result": {...}}` line of the stream.
struct WatchResponse {
    ResponseHeader header;
    int64_t watch_id = 0;
    bool created = false;   // the first line of a stream
    bool canceled = false;  // the server ended this watch
    int64_t compact_revision = 0;  // canceled because start_revision was compacted
    std::string cancel_reason;
    std::vector<Event> events;  // in revision order
    // Set by the client, not read from the answer: the next answer of the
    // stream had already arrived when this one was handed over, so a caller
    // may take both in one write without waiting for anything.
    bool more_at_hand = false;

    // A progress notification: only a header, saying that nothing in the
    // range changed up to header.revision. Catch-up batches, by contrast,
    // carry a header revision *ahead* of their events: persist the highest
    // applied event's mod_revision, never an event batch's header revision.
    bool is_progress_notify() const { return !created && !canceled && events.empty(); }
};

// The error shapes of the gateway. A refused unary call answers HTTP 4xx/5xx
// with {"error": "...", "message": "...", "code": N} (a gRPC code); a stream
// that fails after it started carries a line {"error": {"grpc_code": N,
// "http_code": N, "message": "..."}} under HTTP 200 (e.g. "etcdserver: no
// leader" with grpc_code 14).
struct GatewayError {
    int grpc_code = 0;   // 11 OUT_OF_RANGE, 14 UNAVAILABLE, 3 INVALID_ARGUMENT...
    int http_code = 0;   // only in stream errors; 0 when absent
    std::string message;

    // "etcdserver: mvcc: required revision has been compacted" (code 11).
    // Code 11 alone is not enough: a future revision is code 11 as well.
    bool is_compacted() const;
    // "etcdserver: no leader": the member has lost its leader.
    bool is_no_leader() const;
    // "etcdserver: requested lease not found" (code 5): expired or revoked.
    bool is_lease_not_found() const;
};

bool parse_gateway_error(std::string_view text, GatewayError &out, std::string &error);

// One line of the watch stream (without its '\n'): either a result or a
// stream error.
struct WatchLine {
    bool is_error = false;
    WatchResponse result;  // when !is_error
    GatewayError error;    // when is_error
};

bool parse_watch_line(std::string_view line, WatchLine &out, std::string &error);

// The first line of a keep-alive stream: a result or a stream error.
struct LeaseKeepAliveLine {
    bool is_error = false;
    LeaseKeepAliveResponse result;  // when !is_error
    GatewayError error;             // when is_error
};

bool parse_lease_keepalive_line(std::string_view line, LeaseKeepAliveLine &out, std::string &error);

}  // namespace keyauth::etcd
