#include "leak_report.h"

#include <nlohmann/json.hpp>

#include "etcd_keyspace.h"
#include "sha256.h"
#include "strict_json.h"

namespace keyauth {
namespace {

using nlohmann::json;

// A first reading of the body that builds nothing: it counts the top-level
// array's entries and the nesting, and stops at the first one too many, so
// a body of a million tiny entries never becomes a million JSON values.
class EntryCounter {
public:
    enum class Stop { kNone, kTooMany, kTooDeep, kNotJson };
    Stop stop = Stop::kNone;

    bool null() { return value(); }
    bool boolean(bool) { return value(); }
    bool number_integer(json::number_integer_t) { return value(); }
    bool number_unsigned(json::number_unsigned_t) { return value(); }
    bool number_float(json::number_float_t, const json::string_t &) { return value(); }
    bool string(json::string_t &) { return value(); }
    bool binary(json::binary_t &) { return value(); }
    bool key(json::string_t &) { return true; }
    bool start_object(size_t) { return open(false); }
    bool start_array(size_t) { return open(true); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }
    bool parse_error(size_t, const std::string &, const nlohmann::detail::exception &) {
        stop = Stop::kNotJson;
        return false;
    }

private:
    bool value() { return depth_ != 1 || count(); }
    bool open(bool array) {
        if (depth_ == 0) root_array_ = array;
        if (depth_ == 1 && !count()) return false;
        if (++depth_ > kMaxLeakReportDepth) {
            stop = Stop::kTooDeep;
            return false;
        }
        return true;
    }
    bool close() {
        --depth_;
        return true;
    }
    bool count() {
        if (!root_array_) return true;  // the second reading says what is wrong
        if (++entries_ > kMaxLeakReportTokens) {
            stop = Stop::kTooMany;
            return false;
        }
        return true;
    }

    int depth_ = 0;
    bool root_array_ = false;
    size_t entries_ = 0;
};

LeakReport refused(LeakReportStatus status, std::string error) {
    LeakReport r;
    r.status = status;
    r.error = std::move(error);
    return r;
}

std::string entry_name(size_t index) { return "entry " + std::to_string(index + 1); }

// entry[name] as a string of at most `max` bytes, or the sentence saying
// why not. An optional member may be absent or null ("").
bool member_text(const json &entry, const char *name, size_t max, bool required, size_t index, std::string &out,
                 std::string &error) {
    const auto it = entry.find(name);
    if (it == entry.end() || (!required && it->is_null())) {
        if (required) error = entry_name(index) + " has no " + name;
        return !required;
    }
    if (!it->is_string()) {
        error = entry_name(index) + ": " + name + " is not a string";
        return false;
    }
    const std::string &text = it->get_ref<const std::string &>();
    if (required && text.empty()) {
        error = entry_name(index) + ": " + name + " is empty";
        return false;
    }
    if (text.size() > max) {
        error = entry_name(index) + ": " + name + " is over " + std::to_string(max) + " bytes";
        return false;
    }
    out = text;
    return true;
}

LeakReport parse(std::string_view body) {
    if (body.size() > kMaxLeakReportBytes) return refused(LeakReportStatus::kTooLarge, "the report is over 1 MiB");
    EntryCounter counter;
    json::sax_parse(body.begin(), body.end(), &counter);
    switch (counter.stop) {
    case EntryCounter::Stop::kTooMany:
        return refused(LeakReportStatus::kTooLarge,
                       "the report holds over " + std::to_string(kMaxLeakReportTokens) + " entries");
    case EntryCounter::Stop::kTooDeep:
        return refused(LeakReportStatus::kMalformed,
                       "the report nests deeper than " + std::to_string(kMaxLeakReportDepth) + " levels");
    // nlohmann's own message quotes the text it stopped at: a token, maybe
    case EntryCounter::Stop::kNotJson: return refused(LeakReportStatus::kMalformed, "the report is not JSON");
    case EntryCounter::Stop::kNone: break;
    }

    std::string duplicate;
    const json doc = parse_json_strict(body, duplicate);
    if (doc.is_discarded()) return refused(LeakReportStatus::kMalformed, "the report is not JSON");
    // the repeated name itself is not quoted: it could be a token
    if (!duplicate.empty()) return refused(LeakReportStatus::kMalformed, "a member name repeats within an object");
    if (!doc.is_array()) return refused(LeakReportStatus::kMalformed, "the report is not a JSON array");

    LeakReport report;
    report.tokens.reserve(doc.size());
    std::string error;
    for (size_t i = 0; i < doc.size(); ++i) {
        const json &entry = doc[i];
        if (!entry.is_object()) return refused(LeakReportStatus::kMalformed, entry_name(i) + " is not an object");
        ReportedToken t;
        if (!member_text(entry, "token", kMaxReportedTokenBytes, true, i, t.token, error) ||
            !member_text(entry, "type", kMaxReportedNameBytes, false, i, t.type, error) ||
            !member_text(entry, "url", kMaxReportedUrlBytes, false, i, t.url, error) ||
            !member_text(entry, "source", kMaxReportedNameBytes, false, i, t.source, error)) {
            return refused(LeakReportStatus::kMalformed, error);
        }
        report.tokens.push_back(std::move(t));
    }
    return report;
}

}  // namespace

LeakReport parse_leak_report(std::string_view body) noexcept {
    try {
        return parse(body);
    } catch (...) {  // std::bad_alloc: nothing else here throws
        LeakReport r;
        r.status = LeakReportStatus::kMalformed;
        r.error = "out of memory";  // short enough to need no allocation
        return r;
    }
}

std::string leak_feedback_json(const std::vector<LeakFeedback> &feedback) {
    // GitHub's order of the members, for whoever reads an answer
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const LeakFeedback &f : feedback) {
        out.push_back({{"token_hash", f.token_hash_hex},
                       {"token_type", f.token_type},
                       {"label", f.true_positive ? "true_positive" : "false_positive"}});
    }
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string token_sha256_hex(std::string_view token) {
    const Digest d = sha256(token);
    return hex_encode(std::string_view(reinterpret_cast<const char *>(d.data()), d.size()));
}

}  // namespace keyauth
