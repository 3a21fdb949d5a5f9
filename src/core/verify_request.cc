#include "verify_request.h"

#include <netinet/in.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "ip_address.h"

namespace keyauth {
namespace {

constexpr const char kCostRange[] = "must be an integer from 0 to 1000000000";
static_assert(KA_QUOTA_MAX_COST == 1000000000, "kCostRange names the bound");

constexpr size_t kMaxShownName = 24;
static_assert(kMaxShownName < KA_VERIFY_FIELD_LEN, "a shown name fits out.field");

enum Field { kKey, kScopes, kCost, kIp, kFields };
constexpr const char *kFieldNames[kFields] = {"key", "scopes", "cost", "ip"};

class Parser {
  public:
    Parser(std::string_view body, ka_verify_request_t &out)
        : begin_(body.data()), p_(body.data()), end_(body.data() + body.size()), out_(out) {}

    bool request();

  private:
    bool fail(const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
    bool not_json() { return fail("body", "is not valid JSON (at byte %zu)", offset()); }
    size_t offset() const { return static_cast<size_t>(p_ - begin_); }
    void ws() {
        while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) p_++;
    }
    bool at(char c) const { return p_ < end_ && *p_ == c; }
    // After an object member or an array element: a comma (another one
    // follows), the closing bracket, or neither.
    enum Next { kMore, kDone, kBroken };
    Next after_item(char close) {
        ws();
        if (at(',')) {
            p_++;
            ws();
            return kMore;
        }
        if (at(close)) {
            p_++;
            return kDone;
        }
        return kBroken;
    }
    bool null();
    // A JSON string at p_ (its opening quote): its raw bytes between the
    // quotes, and whether any was escaped. False if it is not well-formed.
    bool string(std::string_view &s, bool &escaped);
    bool value(Field f);
    bool key();
    bool scopes();
    bool cost();
    bool ip();

    const char *begin_;
    const char *p_;
    const char *end_;
    ka_verify_request_t &out_;
};

bool Parser::fail(const char *field, const char *fmt, ...) {
    snprintf(out_.field, sizeof out_.field, "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out_.error, sizeof out_.error, fmt, ap);
    va_end(ap);
    return false;
}

bool Parser::null() {
    if (end_ - p_ >= 4 && std::memcmp(p_, "null", 4) == 0) {
        p_ += 4;
        return true;
    }
    return false;
}

bool Parser::string(std::string_view &s, bool &escaped) {
    const char *start = ++p_;
    escaped = false;
    while (p_ < end_) {
        const unsigned char c = static_cast<unsigned char>(*p_);
        if (c == '"') {
            s = std::string_view(start, static_cast<size_t>(p_ - start));
            p_++;
            return true;
        }
        if (c < 0x20) return false;
        if (c != '\\') {
            p_++;
            continue;
        }
        escaped = true;
        if (++p_ == end_) return false;
        if (*p_ == 'u') {
            for (int i = 0; i < 4; i++) {
                if (++p_ == end_ || !std::isxdigit(static_cast<unsigned char>(*p_))) return false;
            }
        } else if (std::strchr("\"\\/bfnrt", *p_) == nullptr || *p_ == '\0') {
            return false;
        }
        p_++;
    }
    return false;
}

bool Parser::request() {
    if (end_ - begin_ > KA_VERIFY_MAX_BODY) return fail("body", "is over %d bytes", KA_VERIFY_MAX_BODY);
    ws();
    if (p_ == end_) return fail("body", "is empty; expected a JSON object");
    if (*p_ != '{') return fail("body", "is not a JSON object");
    p_++;
    ws();
    bool seen[kFields] = {};
    if (at('}')) {
        p_++;
    } else {
        for (;;) {
            std::string_view name;
            bool escaped;
            if (!at('"') || !string(name, escaped)) return not_json();
            int f = 0;
            while (f < kFields && (escaped || name != kFieldNames[f])) f++;
            if (f == kFields) {
                // named when it is a short plain word (too short for a
                // key: a key pasted as a name is never echoed)
                bool word = !escaped && !name.empty() && name.size() <= kMaxShownName;
                for (char c : name) {
                    word = word && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
                }
                char shown[KA_VERIFY_FIELD_LEN];
                snprintf(shown, sizeof shown, "%.*s", word ? static_cast<int>(name.size()) : 0, name.data());
                return fail(word ? shown : "body", "%s%s is not a field of a verify request; "
                            "expected key, scopes, cost or ip", word ? "" : "a field ",
                            word ? "" : "with that name");
            }
            if (seen[f]) return fail(kFieldNames[f], "is given twice");
            seen[f] = true;
            ws();
            if (!at(':')) return not_json();
            p_++;
            ws();
            if (!value(static_cast<Field>(f))) return false;
            const Next next = after_item('}');
            if (next == kDone) break;
            if (next == kBroken) return not_json();
        }
    }
    ws();
    if (p_ != end_) return fail("body", "has bytes after the JSON object (at byte %zu)", offset());
    if (!seen[kKey]) return fail("key", "is required");
    return true;
}

bool Parser::value(Field f) {
    // an optional field given as null is not given
    if (f != kKey && null()) return true;
    switch (f) {
        case kKey: return key();
        case kScopes: return scopes();
        case kCost: return cost();
        default: return ip();
    }
}

bool Parser::key() {
    std::string_view s;
    bool escaped;
    if (!at('"')) return fail("key", "must be a string");
    if (!string(s, escaped)) return not_json();
    if (s.empty()) return fail("key", "must not be empty");
    // no key needs an escape: one written with escapes is not as issued
    if (escaped) return fail("key", "must be the key as issued, without JSON escapes");
    out_.key = {s.data(), s.size()};
    return true;
}

bool Parser::scopes() {
    if (!at('[')) return fail("scopes", "must be an array of scopes");
    p_++;
    ws();
    if (at(']')) {
        p_++;
        return true;
    }
    for (;;) {
        std::string_view s;
        bool escaped;
        if (out_.n_scopes == KA_VERIFY_MAX_SCOPES) {
            return fail("scopes", "has more than %d scopes", KA_VERIFY_MAX_SCOPES);
        }
        if (at(']')) return not_json();  // a comma before it
        if (!at('"')) return fail("scopes", "scopes[%zu] must be a string", out_.n_scopes);
        if (!string(s, escaped)) return not_json();
        if (escaped || !ka_required_scope_ok(s.data(), s.size())) {
            return fail("scopes", "scopes[%zu] must be <resource>:<action> of [a-z0-9_.-], "
                        "1-31 characters each, without *", out_.n_scopes);
        }
        out_.scopes[out_.n_scopes++] = {s.data(), s.size()};
        const Next next = after_item(']');
        if (next == kDone) return true;
        if (next == kBroken) return not_json();
    }
}

bool Parser::cost() {
    if (!at('-') && !(p_ < end_ && *p_ >= '0' && *p_ <= '9')) return fail("cost", kCostRange);
    if (at('-')) return fail("cost", kCostRange);
    uint64_t n = 0;
    const char *start = p_;
    while (p_ < end_ && *p_ >= '0' && *p_ <= '9') {
        n = n * 10 + static_cast<uint64_t>(*p_ - '0');
        if (n > KA_QUOTA_MAX_COST) return fail("cost", kCostRange);
        p_++;
    }
    if (p_ - start > 1 && *start == '0') return not_json();  // JSON has no leading zeros
    if (at('.') || at('e') || at('E')) return fail("cost", kCostRange);
    out_.cost = n;
    return true;
}

bool Parser::ip() {
    std::string_view s;
    bool escaped;
    if (!at('"')) return fail("ip", "must be a string");
    if (!string(s, escaped)) return not_json();
    IpInfo info;
    if (escaped || !parse_ip(s, info)) return fail("ip", "must be an IPv4 or IPv6 address");
    std::memset(&out_.ip, 0, sizeof out_.ip);
    if (info.version == 4) {
        auto *sin = reinterpret_cast<sockaddr_in *>(&out_.ip);
        sin->sin_family = AF_INET;
        std::memcpy(&sin->sin_addr, info.bytes, 4);
    } else {
        auto *sin6 = reinterpret_cast<sockaddr_in6 *>(&out_.ip);
        sin6->sin6_family = AF_INET6;
        std::memcpy(&sin6->sin6_addr, info.bytes, 16);
    }
    out_.client = reinterpret_cast<const sockaddr *>(&out_.ip);
    return true;
}

}  // namespace

bool parse_verify_request(std::string_view body, ka_verify_request_t &out) noexcept {
    out.key = {nullptr, 0};
    out.n_scopes = 0;
    out.cost = 1;  // like keyauth_cost's default
    out.client = nullptr;
    out.field[0] = '\0';
    out.error[0] = '\0';
    return Parser(body, out).request();
}

}  // namespace keyauth

extern "C" int ka_verify_parse(const char *body, size_t len, ka_verify_request_t *out) {
    return keyauth::parse_verify_request(std::string_view(body != nullptr ? body : "", body != nullptr ? len : 0),
                                         *out)
               ? 1
               : 0;
}
