// The deployment's settings in the meta table that are the store's alone
// (never mirrored to an edge): the key prefix NAME of new keys and every
// earlier one (key_format.h, SCHEMA.md "Key prefix record").
#include <nlohmann/json.hpp>

#include <algorithm>

#include "key_format.h"
#include "keyauth_schema.h"
#include "store.h"
#include "store_internal.h"

namespace keyauth {
using namespace store_detail;
namespace {

constexpr int kKeyPrefixRecordVersion = 1;

// {"v":1,"prefixes":["acme","ka"]}: valid NAMEs, distinct, newest first.
std::string encode_key_prefixes(const std::vector<std::string> &names) {
    return nlohmann::json{{"v", kKeyPrefixRecordVersion}, {"prefixes", names}}.dump();
}

// Absent: the default NAME alone. Anything else than encode's layout is
// corruption (a newer writer's layout too: this one cannot know its rules).
std::vector<std::string> decode_key_prefixes(std::optional<std::string_view> stored) {
    if (!stored) return {std::string(kDefaultKeyPrefixName)};
    const auto j = nlohmann::json::parse(stored->begin(), stored->end(), nullptr, false);
    const bool layout = j.is_object() && j.size() == 2 && j.contains("v") && j["v"].is_number_integer() &&
                        j["v"] == kKeyPrefixRecordVersion && j.contains("prefixes") && j["prefixes"].is_array() &&
                        !j["prefixes"].empty();
    if (!layout) corrupt("the key prefix record is unreadable");
    std::vector<std::string> names;
    for (const auto &n : j["prefixes"]) {
        if (!n.is_string() || !valid_key_prefix_name(n.get_ref<const std::string &>()) ||
            std::find(names.begin(), names.end(), n.get_ref<const std::string &>()) != names.end())
            corrupt("the key prefix record is unreadable");
        names.push_back(n.get<std::string>());
    }
    return names;
}

}  // namespace

namespace store_detail {

std::string key_prefix_for_write(RecordReader &r, Mutation &m) {
    const auto stored = r.get(Table::kMeta, KA_META_KEY_PREFIX);
    m.expect(Table::kMeta, KA_META_KEY_PREFIX, stored);  // a prefix set meanwhile: read again
    return decode_key_prefixes(stored).front() + "_";
}

}  // namespace store_detail

std::vector<std::string> Store::set_key_prefix(std::string_view name, const Actor &actor) {
    if (!valid_key_prefix_name(name))
        invalid("keyPrefix", "a key prefix is 2 to 10 lowercase letters or digits, and not \"kac\" or \"kaa\" "
                             "(the console and admin tokens')");
    return write([&](RecordReader &r, Mutation &m) {
        const auto stored = r.get(Table::kMeta, KA_META_KEY_PREFIX);
        std::vector<std::string> names = decode_key_prefixes(stored);
        if (names.front() == name) return names;  // nothing changes: no write, no event
        const std::string before = names.front();
        names.erase(std::remove(names.begin(), names.end(), name), names.end());
        names.insert(names.begin(), std::string(name));
        m.expect(Table::kMeta, KA_META_KEY_PREFIX, stored);
        m.put(Table::kMeta, KA_META_KEY_PREFIX, encode_key_prefixes(names));
        std::vector<AuditEvent> events;
        audit(events, actor, clock_(), Id{}, "config.set_key_prefix", "config", "")
            .change("keyPrefix", before, names.front());
        put_audit(r, m, events);
        return names;
    });
}

std::vector<std::string> Store::key_prefixes() {
    auto r = backend_->read();  // what get returns lives as long as the reader
    return decode_key_prefixes(r->get(Table::kMeta, KA_META_KEY_PREFIX));
}

}  // namespace keyauth
