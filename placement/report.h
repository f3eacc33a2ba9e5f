#pragma once
// What `check` prints: a table (placed module groups, per-device memory, diagnostics), one JSON
// document, or the --explain trace of one module.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "placement/check.h"

namespace switchyard {

std::string format_check_table(const CheckResult& result, const MemoryBudget& budget);
nlohmann::ordered_json check_to_json(const CheckResult& result, const MemoryBudget& budget);
// Each rule tried for `module_name`, and why it did or did not match. Unknown names get a
// did-you-mean in the returned text and `found` false.
std::string explain_module(const CheckResult& result, std::string_view module_name, bool& found);
// "layers 0-14 self_attn" style name of a module group.
std::string module_group_suffix(const Module& module);

}  // namespace switchyard
