#pragma once
// Cross-checks of a PlacementPlan: the findings that would otherwise surface after loading the
// weights, as "Expected all tensors to be on the same device" or an idle GPU.
#include "core/diagnostics.h"
#include "placement/placement_plan.h"

namespace switchyard {

// Adds errors and warnings about device ranges, the transfer_map, layer/device agreement, expert
// hand-off devices, coverage of multi-GPU profiles and dead rules.
void validate_plan(const PlacementPlan& plan, Diagnostics& diagnostics);

// True when the profile spreads work over two or more GPUs.
bool is_multi_gpu(const PlacementPlan& plan);

}  // namespace switchyard
