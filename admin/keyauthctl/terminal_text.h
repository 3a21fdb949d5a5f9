// Text from the store (names, audit actors, changes) as keyauthctl shows it
// on a terminal: what another party wrote must not drive the operator's
// terminal (escape sequences) or reorder what it shows (bidi controls).
#pragma once

#include <string>
#include <string_view>

namespace keyauthctl {

// The text with every C0 control, DEL, C1 control (U+0080..U+009F) and
// Unicode bidirectional control (U+061C, U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069) written as \uXXXX, as JSON writes them, and every byte
// that is not part of valid UTF-8 as \xNN; everything else unchanged. A
// backslash stays as it is: the escapes are there to disarm, not to be
// read back.
std::string terminal_safe(std::string_view text);

}  // namespace keyauthctl
