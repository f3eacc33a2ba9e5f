#pragma once
// A rule written back as a profile's text: what `split` writes for the command line's quick rules
// (placement/quick_rules.h), so that the profile it writes places as the flags did.
#include <string>

#include "placement/rule_set.h"

namespace switchyard {

// One "- match: ... replace: ..." item, opened by "# command line: ORIGIN" for a quick rule, and
// ending in a newline. parse_rules reads it back to the same match, replacement, kwargs, devices,
// ops, transfer_map and recursion. The kwargs are written as the rule keeps them (JSON values in
// YAML's flow style; a transfer_map's layer numbers as integer keys).
std::string rule_yaml(const Rule& rule);

}  // namespace switchyard
