#include "strict_json.h"

#include <set>
#include <vector>

namespace keyauth {

nlohmann::json parse_json_strict(std::string_view text, std::string &duplicate, std::string *broken) {
    using nlohmann::json;
    duplicate.clear();
    std::vector<std::set<std::string>> open_objects;
    std::string reading;  // the top-level member whose value is being read
    auto watch = [&](int depth, json::parse_event_t event, json &parsed) {
        switch (event) {
        case json::parse_event_t::object_start: open_objects.emplace_back(); break;
        case json::parse_event_t::object_end:
            if (!open_objects.empty()) open_objects.pop_back();
            if (depth == 1) reading.clear();
            break;
        case json::parse_event_t::key:
            if (depth == 1) reading = parsed.get<std::string>();
            if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second &&
                duplicate.empty()) {
                duplicate = parsed.get<std::string>();
            }
            break;
        case json::parse_event_t::array_end:
        case json::parse_event_t::value:
            if (depth == 1) reading.clear();  // that member's value is whole
            break;
        default: break;
        }
        return true;
    };
    json out = json::parse(text, watch, false);
    if (broken) *broken = out.is_discarded() && open_objects.size() >= 1 ? reading : std::string();
    return out;
}

}  // namespace keyauth
