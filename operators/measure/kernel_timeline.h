#pragma once
// The report of a decode step's kernel timeline (measure/cuda/timeline.h, `bench decode --timeline`): the
// stamps at the end of each kernel's PDL wait, paired with the launches in order. Plain C++: the
// pairing and the statistics are tested without a GPU.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace switchyard {

struct KernelTimelineRow {
  std::string kernel;       // short_kernel_name
  std::int64_t launches = 0;  // a step (cycle: how many repeats the median covers, in all steps)
  double median_us = 0;     // of the gaps after one of its launches
  double step_us = 0;       // its gaps summed over a step, median over the steps (by_kernel only)
};

struct KernelTimeline {
  std::int64_t steps = 0, launches_per_step = 0;
  double step_us = 0;      // median, first stamp of a step to the next step's first
  double between_us = 0;   // median gap from a step's last stamp to the next step's first
  // The share of the launches whose stamp equals the one before (a gap of 0): a kernel's gap is
  // 2-20 us, so a share above a few percent means the GPU's global timer advances in steps as long
  // as kernels (some machines step ~4 us) and the medians say little.
  double equal_share = 0;
  std::vector<KernelTimelineRow> by_kernel;  // most time a step first
  // One period of the launches' repeating pattern (a layer), in launch order from cycle_start:
  // each position's median gap over its repeats and the steps. Empty when nothing repeats.
  std::vector<KernelTimelineRow> cycle;
  std::int64_t cycle_start = 0;
  // A span of the step (span_from <= span_to, launch indices): median over the steps of the time
  // from launch span_from's stamp to launch span_to's; 0 without a span.
  double span_us = 0;
};

// Launches [from, to) of a step, for analyse_kernel_timeline's span.
struct LaunchSpan {
  std::size_t from = 0, to = 0;
};

// launches: one step's kernels in launch order; stamps: the wait ends (ns) of whole steps in a row,
// launches.size() a step. Throws InputError when they do not pair (a kernel whose first thread
// returned before its wait, or launches outside the recorded step).
// span (optional): also the median time of those launches, from the first one's stamp to the
// stamp of the launch after them (the wait end that follows their work); InputError when it does
// not fit in the step (to < launches.size(): the span needs the launch after it).
KernelTimeline analyse_kernel_timeline(const std::vector<std::string>& launches,
                                       const std::vector<std::uint64_t>& stamps, std::optional<LaunchSpan> span = {});

// A kernel's name for a table: demangled when mangled, without its namespaces, return type and
// parameters (template arguments kept): "gemv_shared_kernel", "route_one_token<float, true>".
std::string short_kernel_name(const std::string& name);

// The bench's tables.
std::string format_kernel_timeline(const KernelTimeline& timeline);

}  // namespace switchyard
