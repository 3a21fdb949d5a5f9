// keyauth-syncd's log: one JSON line per event on stderr (keyauth::emit),
// {"ts": ..., "event": ..., fields...}. Names, revisions, counts and
// endpoints only: never the value of a record.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace keyauth::syncd {

void log_event(std::string_view event, const nlohmann::ordered_json &fields = nlohmann::ordered_json::object());

}  // namespace keyauth::syncd
