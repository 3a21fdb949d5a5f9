// Secrets reported as leaked (DESIGN, *Leaked keys revoke themselves*): the
// one write behind GitHub's secret scanning endpoint, the admin API's
// report-leak route and keyauthctl's, whichever secret it is. Each kind's
// part lives beside its records (store_keys.cc, store_admin_tokens.cc,
// store_accounts.cc); this file tells them apart and puts the audit events.
#include "key_format.h"
#include "keyauth_schema.h"
#include "sha256.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

LeakedSecret kind_of(std::string_view secret) {
    if (secret_format_ok(secret, kAdminTokenPrefix)) return LeakedSecret::kAdminToken;
    if (secret_format_ok(secret, kConsoleTokenPrefix)) return LeakedSecret::kConsoleToken;
    if (key_format_ok(secret)) return LeakedSecret::kKey;  // of any prefix this deployment had
    return LeakedSecret::kNone;
}

void validate_text(std::string_view text, size_t max, const char *field) {
    if (text.size() > max) invalid(field, std::string(field) + " is over " + std::to_string(max) + " bytes");
    for (unsigned char c : text) {
        if (c < 0x20 || c == 0x7f) invalid(field, std::string(field) + " holds a control character");
    }
}

}  // namespace

namespace store_detail {

void note_leak(AuditEvent &e, const LeakReportOrigin &origin) {
    e.change("leak", nullptr,
             {{"source", origin.source},
              {"url", origin.url.empty() ? nlohmann::json(nullptr) : nlohmann::json(origin.url)}});
}

}  // namespace store_detail

LeakOutcome Store::report_leak(std::string_view secret, LeakAction action, const LeakReportOrigin &origin,
                               const Actor &actor) {
    validate_text(origin.url, kMaxLeakUrlBytes, "url");
    validate_text(origin.source, kMaxLeakSourceBytes, "source");
    const LeakedSecret kind = kind_of(secret);
    if (kind == LeakedSecret::kNone) return {};
    const Digest hash = sha256(secret);
    // Most reports name secrets of no one here (GitHub's pattern matches
    // text that only looks like a key): a read answers them, not a write.
    const Table table = kind == LeakedSecret::kKey          ? Table::kKeysByHash
                        : kind == LeakedSecret::kAdminToken ? Table::kAdminTokens
                                                            : Table::kConsoleTokens;
    if (!backend_->read()->get(table, bytes(hash))) return {};
    return write([&](RecordReader &r, Mutation &m) {
        std::vector<AuditEvent> events;
        const LeakWrite w{action, origin, actor, clock_(), events};
        LeakOutcome out = kind == LeakedSecret::kKey          ? key_leak_in(r, m, bytes(hash), w)
                          : kind == LeakedSecret::kAdminToken ? admin_token_leak_in(r, m, bytes(hash), w)
                                                              : console_token_leak_in(r, m, bytes(hash), w);
        put_audit(r, m, events);
        return out;
    });
}

std::map<Id, KeyLeak> Store::key_leaks(const Id &account) {
    std::map<Id, KeyLeak> out;
    const std::string own(bytes(account));
    backend_->read()->scan(Table::kReportedLeaks, own, own, [&](std::string_view key, std::string_view v) {
        if (key.size() != 2 * KA_ID_LEN || key.substr(0, KA_ID_LEN) != own) return false;
        auto leak = decode_key_leak(v);
        if (!leak) corrupt("a leak report is unreadable");
        Id key_id{};
        std::copy(key.begin() + KA_ID_LEN, key.end(), key_id.begin());
        out.emplace(key_id, std::move(*leak));
        return true;
    });
    return out;
}

}  // namespace keyauth
