#include "program_usage.h"

#include <cstdlib>
#include <iostream>

#include "cli_values.h"

namespace keyauth {

void ProgramUsage::error(const std::string &msg) const {
    std::cerr << program_ << ": " << msg << "\n\n" << usage_;
    std::exit(2);
}

size_t ProgramUsage::bounded(const std::string &option, const std::string &text, size_t lo, size_t hi,
                             const char *unit) const {
    auto v = parse_bounded(text, lo, hi);
    if (!v) {
        error(option + " takes " + unit + " from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return *v;
}

}  // namespace keyauth
