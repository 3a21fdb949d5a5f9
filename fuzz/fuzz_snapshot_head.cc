// The head line of a snapshot copy (snapshot_copy.h), as GET /snapshot
// reads it from the copy process. Never a crash; whatever parses prints
// back to a line that parses to the same head.
#include <string>
#include <string_view>

#include "snapshot_copy.h"

extern "C" int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const std::string_view in(reinterpret_cast<const char *>(data), size);
    const auto head = keyauth::syncd::parse_snapshot_head(in);
    if (!head) return 0;
    if (head->revision < 0) __builtin_trap();
    const std::string line = keyauth::syncd::snapshot_head_line(*head);
    const auto again = keyauth::syncd::parse_snapshot_head(std::string_view(line).substr(0, line.size() - 1));
    if (!again || again->revision != head->revision || again->cluster_id != head->cluster_id ||
        again->schema_version != head->schema_version) {
        __builtin_trap();
    }
    return 0;
}
