#pragma once
// The runs of literal bytes that every match of a PCRE2 pattern (compiled with no options) must
// contain, longest first. A module name that lacks one cannot match, so substring tests can stand
// in for a regex search that would fail: most rules fail on most modules, and a profile of 100,000 rules
// against DeepSeek-V3's 60,000 modules is checked in seconds only because of that.
//
// The answer is conservative: any substring of a returned run is required of every match, and no
// run (no filter) is returned wherever the pattern holds something this reader does not model
// (top-level alternation, inline case-insensitive or extended mode, \Q...\E, verbs, escapes with
// arguments). Wrong would be a run that some match lacks: a rule would then silently stop matching.
#include <string>
#include <string_view>
#include <vector>

namespace switchyard {

std::vector<std::string> required_literals(std::string_view pattern);

}  // namespace switchyard
