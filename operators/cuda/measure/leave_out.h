#pragma once
// A measuring aid for `bench decode --leave_out` (defined in launch.cu; its hook in launch_kernel is
// measuring_aids.h's).
#include <string>
#include <vector>

namespace switchyard::cuda {

// A measuring aid (`bench decode --leave_out`): kernels whose mangled names contain one of `words`
// are not launched from now on (an empty list launches every kernel again). The results are then
// wrong; the step time without them is the measure of their cost in the chain, where ncu's
// serialised times mislead (a kernel that hides under the next one's weight prefetch costs
// nothing in the chain and microseconds in ncu). Launches already captured in a graph keep
// their kernels: capture again after a change.
void leave_out_kernels(std::vector<std::string> words);
// The names of the kernels left out since the last leave_out_kernels.
std::vector<std::string> kernels_left_out();

}  // namespace switchyard::cuda
