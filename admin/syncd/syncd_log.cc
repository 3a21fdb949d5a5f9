#include "syncd_log.h"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "access_log.h"

namespace keyauth::syncd {
namespace {

// RFC 3339 UTC with milliseconds, as keyauthd's access log writes it.
std::string now_rfc3339() {
    const auto now = std::chrono::system_clock::now();
    const int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
    const time_t secs = static_cast<time_t>(ms / 1000);
    struct tm tm {};
    gmtime_r(&secs, &tm);
    char buf[80];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(ms % 1000));
    return buf;
}

}  // namespace

void log_event(std::string_view event, const nlohmann::ordered_json &fields) {
    nlohmann::ordered_json line = {{"ts", now_rfc3339()}, {"event", std::string(event)}};
    if (fields.is_object()) {
        for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
    }
    emit(line);
}

}  // namespace keyauth::syncd
