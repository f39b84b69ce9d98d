// A migration's setup as 'info migrate' shows it in parts ("setup parts: start 0.6, connect 12.5
// (address 1.0, route 0.9), header 3.0 ms"), read back and checked to account for the setup
// time, on either side.
#pragma once

#include <string>
#include <vector>

#include "tests/support/vm_pair.h"

namespace vmm::test {

struct ShownPart {
    std::string name;
    double ms = 0;
    std::vector<ShownPart> inner;  // the transport's steps within it
};

// The parts of a "setup parts" line (its trailing " ms" may be there or not); empty if the
// line does not read as parts.
std::vector<ShownPart> parse_setup_parts(const std::string& text);
std::vector<std::string> names_of(const std::vector<ShownPart>& parts);
double sum_ms(const std::vector<ShownPart>& parts);

// `vm`'s setup parts, with gtest expectations that their names are `names`, that they add up to
// its setup time (within what rounding to 0.1 ms and whole ms leaves), and that every part's
// inner steps add up to no more than the part.
std::vector<ShownPart> expect_setup_parts(Vm& vm, const std::vector<std::string>& names);

}  // namespace vmm::test
