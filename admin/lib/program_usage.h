// What a daemon says when its command line is wrong: the message, then its
// usage, on stderr, and exit status 2 (keyauthd and keyauth-syncd alike).
#pragma once

#include <cstddef>
#include <string>

namespace keyauth {

class ProgramUsage {
public:
    ProgramUsage(const char *program, const char *usage) : program_(program), usage_(usage) {}

    [[noreturn]] void error(const std::string &msg) const;
    // A whole decimal number from lo to hi, or error() naming the option.
    size_t bounded(const std::string &option, const std::string &text, size_t lo, size_t hi,
                   const char *unit) const;

private:
    const char *program_;
    const char *usage_;
};

}  // namespace keyauth
