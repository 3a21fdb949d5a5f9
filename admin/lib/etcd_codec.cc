#include "etcd_codec.h"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <exception>
#include <limits>

namespace keyauth::etcd {

using nlohmann::json;

// ---- primitives ---------------------------------------------------------

// OpenSSL's base64 (libcrypto is linked for SHA-256 anyway). Its decoder
// trims whitespace and counts padding as data, so a decoded text is taken
// only if it encodes back to exactly what came in: etcd sends the canonical
// form, and anything else is refused rather than guessed at.
std::string base64_encode(std::string_view bytes) {
    std::string out((bytes.size() + 2) / 3 * 4 + 1, '\0');  // + EVP's NUL
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char *>(out.data()),
                                  reinterpret_cast<const unsigned char *>(bytes.data()),
                                  static_cast<int>(bytes.size()));
    out.resize(static_cast<size_t>(n));
    return out;
}

bool base64_decode(std::string_view text, std::string &out) {
    out.clear();
    if (text.size() % 4 != 0 || text.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
        return false;
    if (text.empty()) return true;
    std::string bytes(text.size() / 4 * 3, '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char *>(bytes.data()),
                                  reinterpret_cast<const unsigned char *>(text.data()),
                                  static_cast<int>(text.size()));
    if (n < 0) return false;
    const size_t pad = text.back() != '=' ? 0 : text[text.size() - 2] == '=' ? 2 : 1;
    if (static_cast<size_t>(n) < pad) return false;
    bytes.resize(static_cast<size_t>(n) - pad);
    if (base64_encode(bytes) != text) return false;
    out = std::move(bytes);
    return true;
}

std::string prefix_range_end(std::string_view prefix) {
    std::string end(prefix);
    while (!end.empty()) {
        auto last = static_cast<unsigned char>(end.back());
        if (last < 0xff) {
            end.back() = static_cast<char>(last + 1);
            return end;
        }
        end.pop_back();
    }
    return std::string(1, '\0');
}

Compare Compare::absent(std::string key) {
    Compare c;
    c.key = std::move(key);
    c.target = CompareTarget::kCreate;
    c.result = CompareResult::kEqual;
    c.number = 0;
    return c;
}

Compare Compare::value_is(std::string key, std::string value) {
    Compare c;
    c.key = std::move(key);
    c.target = CompareTarget::kValue;
    c.result = CompareResult::kEqual;
    c.value = std::move(value);
    return c;
}

Compare Compare::none_written_after(std::string key, std::string range_end, int64_t revision) {
    Compare c;
    c.key = std::move(key);
    c.range_end = std::move(range_end);
    c.target = CompareTarget::kMod;
    c.result = CompareResult::kLess;
    c.number = revision + 1;
    return c;
}

Compare Compare::mod_revision_is(std::string key, int64_t revision) {
    Compare c;
    c.key = std::move(key);
    c.target = CompareTarget::kMod;
    c.result = CompareResult::kEqual;
    c.number = revision;
    return c;
}

// ---- requests -----------------------------------------------------------

namespace {

// int64 fields go as JSON strings: a JSON number loses precision past 2^53
// in many parsers, which is why the proto3 JSON mapping uses strings.
std::string int64_text(int64_t v) { return std::to_string(v); }

json range_json(const RangeRequest &r) {
    json j = {{"key", base64_encode(r.key)}};
    if (!r.range_end.empty()) j["range_end"] = base64_encode(r.range_end);
    if (r.limit != 0) j["limit"] = int64_text(r.limit);
    if (r.revision != 0) j["revision"] = int64_text(r.revision);
    if (r.keys_only) j["keys_only"] = true;
    if (r.count_only) j["count_only"] = true;
    if (r.serializable) j["serializable"] = true;
    return j;
}

json put_json(const PutRequest &r) {
    json j = {{"key", base64_encode(r.key)}, {"value", base64_encode(r.value)}};
    if (r.lease != 0) j["lease"] = int64_text(r.lease);
    return j;
}

json delete_range_json(const DeleteRangeRequest &r) {
    json j = {{"key", base64_encode(r.key)}};
    if (!r.range_end.empty()) j["range_end"] = base64_encode(r.range_end);
    return j;
}

const char *target_name(CompareTarget t) {
    switch (t) {
    case CompareTarget::kCreate: return "CREATE";
    case CompareTarget::kMod: return "MOD";
    case CompareTarget::kVersion: return "VERSION";
    case CompareTarget::kValue: return "VALUE";
    }
    return "MOD";
}

const char *result_name(CompareResult r) {
    switch (r) {
    case CompareResult::kEqual: return "EQUAL";
    case CompareResult::kGreater: return "GREATER";
    case CompareResult::kLess: return "LESS";
    case CompareResult::kNotEqual: return "NOT_EQUAL";
    }
    return "EQUAL";
}

json compare_json(const Compare &c) {
    json j = {{"key", base64_encode(c.key)},
              {"target", target_name(c.target)},
              {"result", result_name(c.result)}};
    if (!c.range_end.empty()) j["range_end"] = base64_encode(c.range_end);
    // The compared field is always sent, 0 included: it is a oneof, and
    // create_revision "0" is how "the key does not exist" is written.
    switch (c.target) {
    case CompareTarget::kCreate: j["create_revision"] = int64_text(c.number); break;
    case CompareTarget::kMod: j["mod_revision"] = int64_text(c.number); break;
    case CompareTarget::kVersion: j["version"] = int64_text(c.number); break;
    case CompareTarget::kValue: j["value"] = base64_encode(c.value); break;
    }
    return j;
}

json op_json(const RequestOp &op) {
    if (auto *r = std::get_if<RangeRequest>(&op)) return {{"request_range", range_json(*r)}};
    if (auto *p = std::get_if<PutRequest>(&op)) return {{"request_put", put_json(*p)}};
    return {{"request_delete_range", delete_range_json(std::get<DeleteRangeRequest>(op))}};
}

}  // namespace

std::string build_range_request(const RangeRequest &r) { return range_json(r).dump(); }
std::string build_put_request(const PutRequest &r) { return put_json(r).dump(); }
std::string build_delete_range_request(const DeleteRangeRequest &r) {
    return delete_range_json(r).dump();
}

std::string build_txn_request(const TxnRequest &r) {
    json j = json::object();
    json &compare = j["compare"] = json::array();
    for (const Compare &c : r.compare) compare.push_back(compare_json(c));
    json &success = j["success"] = json::array();
    for (const RequestOp &op : r.success) success.push_back(op_json(op));
    json &failure = j["failure"] = json::array();
    for (const RequestOp &op : r.failure) failure.push_back(op_json(op));
    return j.dump();
}

std::string build_watch_create_request(const WatchCreateRequest &r) {
    json c = {{"key", base64_encode(r.key)}};
    if (!r.range_end.empty()) c["range_end"] = base64_encode(r.range_end);
    if (r.start_revision != 0) c["start_revision"] = int64_text(r.start_revision);
    if (r.progress_notify) c["progress_notify"] = true;
    return json{{"create_request", c}}.dump();
}

std::string build_compaction_request(int64_t revision, bool physical) {
    json j = {{"revision", int64_text(revision)}};
    if (physical) j["physical"] = true;
    return j.dump();
}

std::string build_status_request() { return "{}"; }

// The Lease service's fields are upper case in the proto: TTL, ID.
std::string build_lease_grant_request(const LeaseGrantRequest &r) {
    json j = {{"TTL", int64_text(r.ttl_seconds)}};
    if (r.id != 0) j["ID"] = int64_text(r.id);
    return j.dump();
}

std::string build_lease_keepalive_request(int64_t id) { return json{{"ID", int64_text(id)}}.dump(); }
std::string build_lease_revoke_request(int64_t id) { return json{{"ID", int64_text(id)}}.dump(); }

// ---- answers ------------------------------------------------------------

namespace {

// Whether more than `max` arrays and objects are ever open at once in text:
// one pass over the bytes before parsing, so that the parser needs no
// callback (nlohmann's callback parser copies every name it meets: a third
// of syncd's CPU in a catch-up). Text that is not JSON is the parser's to
// refuse.
bool nested_deeper_than(std::string_view text, int max) {
    int depth = 0;
    for (size_t i = 0; i < text.size(); i++) {
        switch (text[i]) {
        case '"':  // to the closing quote: brackets in strings do not count
            for (i++; i < text.size() && text[i] != '"'; i++) {
                if (text[i] == '\\') i++;
            }
            break;
        case '{':
        case '[':
            if (++depth > max) return true;
            break;
        case '}':
        case ']': depth--; break;
        default: break;
        }
    }
    return false;
}

// Parses a JSON object, bounded in size and depth; false says why.
bool parse_object(std::string_view text, json &out, std::string &error) {
    if (text.size() > kMaxAnswerBytes) {
        error = "answer of " + std::to_string(text.size()) + " bytes is over the limit of " +
                std::to_string(kMaxAnswerBytes);
        return false;
    }
    if (nested_deeper_than(text, kMaxJsonDepth)) {
        error = "answer nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
        return false;
    }
    out = json::parse(text.begin(), text.end(), nullptr, false);
    if (out.is_discarded()) {
        error = "answer is not JSON";
        return false;
    }
    if (!out.is_object()) {
        error = "answer is not a JSON object";
        return false;
    }
    return true;
}

// Reading one field of an object. Absent (or null) leaves the default in
// place: the gateway omits zero, false and empty. Present with the wrong
// shape is an error naming the field.
class Fields {
public:
    Fields(const json &obj, std::string path, std::string &error)
        : obj_(obj), path_(std::move(path)), error_(error) {}

    const json *find(const char *name) const {
        auto it = obj_.find(name);
        if (it == obj_.end() || it->is_null()) return nullptr;
        return &*it;
    }

    bool fail(const char *name, const char *what) const {
        error_ = "field " + path_ + name + " " + what;
        return false;
    }

    bool u64(const char *name, uint64_t &out) const {
        const json *v = find(name);
        if (v == nullptr) return true;
        if (v->is_number_integer()) {
            if (!v->is_number_unsigned() && v->get<int64_t>() < 0) return fail(name, "is negative");
            out = v->get<uint64_t>();
            return true;
        }
        if (!v->is_string() || !decimal(v->get_ref<const std::string &>(), out)) {
            return fail(name, "is not a uint64 (a decimal string)");
        }
        return true;
    }

    // Every int64 etcd sends here is a revision, a count or a version, none
    // of which can be negative: a negative one is refused as nonsense.
    bool i64(const char *name, int64_t &out, bool negative_ok = false) const {
        const json *v = find(name);
        if (v == nullptr) return true;
        int64_t n = 0;
        if (v->is_number_integer()) {
            if (v->is_number_unsigned() &&
                v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                return fail(name, "is out of the int64 range");
            }
            n = v->get<int64_t>();
        } else if (v->is_string()) {
            const std::string &s = v->get_ref<const std::string &>();
            bool minus = !s.empty() && s[0] == '-';
            uint64_t mag = 0;
            if (!decimal(std::string_view(s).substr(minus ? 1 : 0), mag)) {
                return fail(name, "is not an int64 (a decimal string)");
            }
            uint64_t max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
            if (mag > max + (minus ? 1 : 0)) return fail(name, "is out of the int64 range");
            n = minus ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
        } else {
            return fail(name, "is not an int64 (a decimal string)");
        }
        if (n < 0 && !negative_ok) return fail(name, "is negative");
        out = n;
        return true;
    }

    bool boolean(const char *name, bool &out) const {
        const json *v = find(name);
        if (v == nullptr) return true;
        if (!v->is_boolean()) return fail(name, "is not a boolean");
        out = v->get<bool>();
        return true;
    }

    bool text(const char *name, std::string &out) const {
        const json *v = find(name);
        if (v == nullptr) return true;
        if (!v->is_string()) return fail(name, "is not a string");
        out = v->get<std::string>();
        return true;
    }

    bool bytes(const char *name, std::string &out) const {
        const json *v = find(name);
        if (v == nullptr) return true;
        if (!v->is_string() || !base64_decode(v->get_ref<const std::string &>(), out)) {
            return fail(name, "is not base64");
        }
        return true;
    }

    // An object or an array, or nullptr when absent.
    bool object(const char *name, const json *&out) const { return shaped(name, out, false); }
    bool array(const char *name, const json *&out) const { return shaped(name, out, true); }

    // An int32 (gRPC and HTTP codes): a JSON number, or a string like int64s.
    bool i32(const char *name, int &out) const {
        int64_t n = 0;
        if (!i64(name, n, true)) return false;
        if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
            return fail(name, "is out of the int32 range");
        }
        out = static_cast<int>(n);
        return true;
    }

private:
    static bool decimal(std::string_view s, uint64_t &out) {
        if (s.empty() || s.size() > 20) return false;
        uint64_t n = 0;
        for (char c : s) {
            if (c < '0' || c > '9') return false;
            unsigned d = static_cast<unsigned>(c - '0');
            if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
            n = n * 10 + d;
        }
        out = n;
        return true;
    }

    bool shaped(const char *name, const json *&out, bool want_array) const {
        out = find(name);
        if (out == nullptr) return true;
        if (want_array ? !out->is_array() : !out->is_object()) {
            return fail(name, want_array ? "is not an array" : "is not an object");
        }
        return true;
    }

    const json &obj_;
    std::string path_;
    std::string &error_;
};

bool read_header(const json &obj, const std::string &path, bool required, ResponseHeader &out,
                 std::string &error) {
    const json *h = nullptr;
    if (!Fields(obj, path, error).object("header", h)) return false;
    if (h == nullptr) {
        if (!required) return true;
        error = "field " + path + "header is missing";
        return false;
    }
    Fields f(*h, path + "header.", error);
    return f.u64("cluster_id", out.cluster_id) && f.u64("member_id", out.member_id) &&
           f.i64("revision", out.revision) && f.u64("raft_term", out.raft_term);
}

bool read_kv(const json &obj, const std::string &path, KeyValue &out, std::string &error) {
    if (!obj.is_object()) {
        error = "field " + path + " is not an object";
        return false;
    }
    Fields f(obj, path + ".", error);
    return f.bytes("key", out.key) && f.bytes("value", out.value) &&
           f.i64("create_revision", out.create_revision) &&
           f.i64("mod_revision", out.mod_revision) && f.i64("version", out.version) &&
           f.i64("lease", out.lease);
}

bool read_range(const json &obj, const std::string &path, bool header_required,
                RangeResponse &out, std::string &error) {
    out = RangeResponse{};
    Fields f(obj, path, error);
    const json *kvs = nullptr;
    if (!read_header(obj, path, header_required, out.header, error) || !f.array("kvs", kvs) ||
        !f.boolean("more", out.more) || !f.i64("count", out.count)) {
        return false;
    }
    if (kvs != nullptr) {
        out.kvs.reserve(kvs->size());
        for (size_t i = 0; i < kvs->size(); ++i) {
            out.kvs.emplace_back();
            if (!read_kv((*kvs)[i], path + "kvs[" + std::to_string(i) + "]", out.kvs.back(), error)) {
                return false;
            }
        }
    }
    return true;
}

bool read_put(const json &obj, const std::string &path, bool header_required, PutResponse &out,
              std::string &error) {
    out = PutResponse{};
    return read_header(obj, path, header_required, out.header, error);
}

bool read_delete_range(const json &obj, const std::string &path, bool header_required,
                       DeleteRangeResponse &out, std::string &error) {
    out = DeleteRangeResponse{};
    return read_header(obj, path, header_required, out.header, error) &&
           Fields(obj, path, error).i64("deleted", out.deleted);
}

// One whole answer: size, JSON, then the typed reader. Nothing escapes: a
// failed allocation on a hostile answer is a bad answer too.
template <typename Reader>
bool parse_answer(std::string_view text, std::string &error, Reader read) {
    error.clear();
    try {
        json j;
        if (!parse_object(text, j, error)) return false;
        return read(j);
    } catch (const std::exception &e) {
        error = std::string("answer could not be read: ") + e.what();
        return false;
    }
}

}  // namespace

bool parse_range_response(std::string_view text, RangeResponse &out, std::string &error) {
    return parse_answer(text, error,
                        [&](const json &j) { return read_range(j, "", true, out, error); });
}

bool parse_put_response(std::string_view text, PutResponse &out, std::string &error) {
    return parse_answer(text, error,
                        [&](const json &j) { return read_put(j, "", true, out, error); });
}

bool parse_delete_range_response(std::string_view text, DeleteRangeResponse &out,
                                 std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        return read_delete_range(j, "", true, out, error);
    });
}

bool parse_txn_response(std::string_view text, TxnResponse &out, std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        out = TxnResponse{};
        Fields f(j, "", error);
        const json *responses = nullptr;
        if (!read_header(j, "", true, out.header, error) || !f.boolean("succeeded", out.succeeded) ||
            !f.array("responses", responses)) {
            return false;
        }
        if (responses == nullptr) return true;
        out.responses.reserve(responses->size());
        for (size_t i = 0; i < responses->size(); ++i) {
            const json &r = (*responses)[i];
            std::string path = "responses[" + std::to_string(i) + "].";
            if (!r.is_object()) {
                error = "field " + path + " is not an object";
                return false;
            }
            // exactly one of the three, as the oneof in the proto
            Fields rf(r, path, error);
            const json *range = nullptr, *put = nullptr, *del = nullptr;
            if (!rf.object("response_range", range) || !rf.object("response_put", put) ||
                !rf.object("response_delete_range", del)) {
                return false;
            }
            if ((range != nullptr) + (put != nullptr) + (del != nullptr) != 1) {
                error = "field " + path + " holds no known response, or more than one";
                return false;
            }
            if (range != nullptr) {
                RangeResponse rr;
                if (!read_range(*range, path + "response_range.", false, rr, error)) return false;
                out.responses.emplace_back(std::move(rr));
            } else if (put != nullptr) {
                PutResponse pr;
                if (!read_put(*put, path + "response_put.", false, pr, error)) return false;
                out.responses.emplace_back(std::move(pr));
            } else {
                DeleteRangeResponse dr;
                if (!read_delete_range(*del, path + "response_delete_range.", false, dr, error)) {
                    return false;
                }
                out.responses.emplace_back(std::move(dr));
            }
        }
        return true;
    });
}

bool parse_status_response(std::string_view text, StatusResponse &out, std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        out = StatusResponse{};
        // the Maintenance service's own fields are camelCase in the proto
        Fields f(j, "", error);
        return read_header(j, "", true, out.header, error) && f.text("version", out.version) &&
               f.u64("leader", out.leader) && f.i64("dbSize", out.db_size);
    });
}

bool parse_compaction_response(std::string_view text, CompactionResponse &out,
                               std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        out = CompactionResponse{};
        return read_header(j, "", true, out.header, error);
    });
}

bool parse_lease_grant_response(std::string_view text, LeaseGrantResponse &out, std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        out = LeaseGrantResponse{};
        Fields f(j, "", error);
        std::string refused;  // the proto's own error field, set instead of a gRPC error
        if (!read_header(j, "", true, out.header, error) || !f.i64("ID", out.id) ||
            !f.i64("TTL", out.ttl_seconds) || !f.text("error", refused)) {
            return false;
        }
        if (!refused.empty()) {
            error = "lease grant refused: " + refused;
            return false;
        }
        if (out.id == 0 || out.ttl_seconds <= 0) {
            error = "lease grant answer without an ID or a TTL";
            return false;
        }
        return true;
    });
}

bool parse_lease_revoke_response(std::string_view text, LeaseRevokeResponse &out,
                                 std::string &error) {
    return parse_answer(text, error, [&](const json &j) {
        out = LeaseRevokeResponse{};
        return read_header(j, "", true, out.header, error);
    });
}

// ---- errors and the streams ---------------------------------------------

bool GatewayError::is_compacted() const {
    return grpc_code == 11 && message.find("required revision has been compacted") != std::string::npos;
}

bool GatewayError::is_no_leader() const { return message.find("no leader") != std::string::npos; }

bool GatewayError::is_lease_not_found() const {
    return grpc_code == 5 && message.find("requested lease not found") != std::string::npos;
}

namespace {

// {"error": "...", "message": "...", "code": N} or, inside a stream,
// {"error": {"grpc_code": N, "http_code": N, "message": "..."}}.
bool read_gateway_error(const json &j, GatewayError &out, std::string &error) {
    out = GatewayError{};
    auto it = j.find("error");
    if (it == j.end()) {
        error = "field error is missing";
        return false;
    }
    if (it->is_object()) {
        Fields f(*it, "error.", error);
        return f.i32("grpc_code", out.grpc_code) && f.i32("http_code", out.http_code) &&
               f.text("message", out.message);
    }
    if (!it->is_string()) {
        error = "field error is neither a string nor an object";
        return false;
    }
    Fields f(j, "", error);
    if (!f.i32("code", out.grpc_code) || !f.text("message", out.message)) return false;
    if (out.message.empty()) out.message = it->get<std::string>();
    return true;
}

bool read_watch_result(const json &r, WatchResponse &out, std::string &error) {
    out = WatchResponse{};
    Fields f(r, "result.", error);
    const json *events = nullptr;
    if (!read_header(r, "result.", true, out.header, error) ||
        !f.i64("watch_id", out.watch_id, true) || !f.boolean("created", out.created) ||
        !f.boolean("canceled", out.canceled) || !f.i64("compact_revision", out.compact_revision) ||
        !f.text("cancel_reason", out.cancel_reason) || !f.array("events", events)) {
        return false;
    }
    if (events == nullptr) return true;
    out.events.reserve(events->size());
    for (size_t i = 0; i < events->size(); ++i) {
        const json &e = (*events)[i];
        std::string path = "result.events[" + std::to_string(i) + "]";
        if (!e.is_object()) {
            error = "field " + path + " is not an object";
            return false;
        }
        Fields ef(e, path + ".", error);
        std::string type;
        const json *kv = nullptr;
        if (!ef.text("type", type) || !ef.object("kv", kv)) return false;
        Event ev;
        if (type.empty() || type == "PUT") {  // PUT is 0, hence omitted
            ev.type = EventType::kPut;
        } else if (type == "DELETE") {
            ev.type = EventType::kDelete;
        } else {
            error = "field " + path + ".type is not PUT or DELETE";
            return false;
        }
        if (kv == nullptr) {
            error = "field " + path + ".kv is missing";
            return false;
        }
        if (!read_kv(*kv, path + ".kv", ev.kv, error)) return false;
        out.events.push_back(std::move(ev));
    }
    return true;
}

}  // namespace

bool parse_gateway_error(std::string_view text, GatewayError &out, std::string &error) {
    return parse_answer(text, error, [&](const json &j) { return read_gateway_error(j, out, error); });
}

namespace {

// One line of a stream: {"result": {...}} for `read_result`, or a stream
// error. `what` names the stream in errors.
template <typename Line, typename ReadResult>
bool parse_stream_line(std::string_view line, Line &out, const char *what, std::string &error,
                       ReadResult read_result) {
    return parse_answer(line, error, [&](const json &j) {
        out = Line{};
        auto result = j.find("result");
        if (result != j.end()) {
            if (!result->is_object()) {
                error = "field result is not an object";
                return false;
            }
            return read_result(*result, out.result);
        }
        if (j.find("error") != j.end()) {
            out.is_error = true;
            return read_gateway_error(j, out.error, error);
        }
        error = std::string(what) + " line holds neither result nor error";
        return false;
    });
}

}  // namespace

bool parse_watch_line(std::string_view line, WatchLine &out, std::string &error) {
    return parse_stream_line(line, out, "watch", error, [&](const json &r, WatchResponse &result) {
        return read_watch_result(r, result, error);
    });
}

bool parse_lease_keepalive_line(std::string_view line, LeaseKeepAliveLine &out, std::string &error) {
    return parse_stream_line(line, out, "keep-alive", error,
                             [&](const json &r, LeaseKeepAliveResponse &result) {
                                 Fields f(r, "result.", error);
                                 return read_header(r, "result.", true, result.header, error) &&
                                        f.i64("ID", result.id) && f.i64("TTL", result.ttl_seconds);
                             });
}

}  // namespace keyauth::etcd
