// The switchover as a commit, tried at one step: a migration whose `side` ("src" or "dst") cuts
// its own link after `step` of the hand-over (x-switchover-cut: 1 STATE, 2 READY, 3 GO, 4
// RUNNING) completes with the guest in exactly one place: the source postmigrate, the destination
// holding the source's RAM. `source_settings` are monitor commands the source gets first (e.g.
// multifd on); `dst_says`, when given, a line the destination's log must have (e.g. its lanes).
// Check with ASSERT_NO_FATAL_FAILURE.
#pragma once

#include <string>
#include <vector>

namespace vmm::test {

void expect_one_copy_after_a_cut(const std::string& side, int step, const std::vector<std::string>& source_settings = {},
                                 const std::string& dst_says = "");

}  // namespace vmm::test
