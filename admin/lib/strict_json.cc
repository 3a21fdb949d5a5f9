#include "strict_json.h"

#include <set>
#include <vector>

namespace keyauth {

nlohmann::json parse_json_strict(std::string_view text, std::string &duplicate) {
    using nlohmann::json;
    duplicate.clear();
    std::vector<std::set<std::string>> open_objects;
    auto watch = [&](int, json::parse_event_t event, json &parsed) {
        switch (event) {
        case json::parse_event_t::object_start: open_objects.emplace_back(); break;
        case json::parse_event_t::object_end:
            if (!open_objects.empty()) open_objects.pop_back();
            break;
        case json::parse_event_t::key:
            if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second &&
                duplicate.empty()) {
                duplicate = parsed.get<std::string>();
            }
            break;
        default: break;
        }
        return true;
    };
    return json::parse(text, watch, false);
}

}  // namespace keyauth
